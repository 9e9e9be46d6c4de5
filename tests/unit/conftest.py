"""Fixtures the unit tests share."""

from __future__ import annotations

import pytest

from tests.support.fake_engine import FakeEngine
from tests.support.fake_server import FakeServer


@pytest.fixture
def no_serving(monkeypatch):
    """`serve` wired to a recording engine class and a server that returns at once."""
    import uvicorn

    import gateway.engine.client

    engines = []

    class RecordingEngine(FakeEngine):
        def __init__(self, config) -> None:
            super().__init__()
            self.config = config
            engines.append(self)

    FakeServer.instances.clear()
    monkeypatch.setattr(gateway.engine.client, "WorkerEngineClient", RecordingEngine)
    monkeypatch.setattr(uvicorn, "Server", FakeServer)
    return engines
