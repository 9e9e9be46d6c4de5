"""Fixtures the unit tests share."""

from __future__ import annotations

import pytest

from tests.support.fake_engine import FakeEngine, fake_checkpoint
from tests.support.fake_server import FakeServer


@pytest.fixture
def no_serving(monkeypatch, tmp_path):
    """`serve` wired to a recording engine class and a server that returns at once; the
    test's `tmp_path` looks like a checkpoint (config.json and weights), so `serve tmp_path`
    gets past the checkpoint check."""
    import uvicorn

    import gateway.workers.client

    engines = []

    class RecordingEngine(FakeEngine):
        def __init__(self, config) -> None:
            super().__init__()
            self.config = config
            engines.append(self)

    fake_checkpoint(tmp_path)
    FakeServer.instances.clear()
    monkeypatch.setattr(gateway.workers.client, "WorkerEngineClient", RecordingEngine)
    monkeypatch.setattr(uvicorn, "Server", FakeServer)
    return engines
