"""The two ZeroMQ endpoints a gateway and its worker share.

The gateway binds both; the worker connects, so the addresses survive worker restarts.
PUSH/PULL in each direction: gateway PUSH -> worker PULL carries Submit/Abort/ControlCall,
worker PUSH -> gateway PULL carries Ready/Step/ControlReply/Heartbeat/Fatal.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Endpoints:
    to_worker: str
    from_worker: str

    @classmethod
    def ipc_in(cls, directory: str) -> Endpoints:
        return cls(
            to_worker=f"ipc://{os.path.join(directory, 'to-worker.sock')}",
            from_worker=f"ipc://{os.path.join(directory, 'from-worker.sock')}",
        )
