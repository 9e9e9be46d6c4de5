"""A stand-in for uvicorn.Server that records what `serve` configured and returns at once."""

from __future__ import annotations


class FakeServer:
    instances: list[FakeServer] = []

    def __init__(self, config) -> None:
        self.config = config
        self.started = False
        FakeServer.instances.append(self)

    def run(self) -> None:
        self.started = True
