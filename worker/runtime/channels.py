"""The worker's two ZeroMQ sockets, created in one place.

The gateway binds both endpoints (protocol/endpoints.py); the worker connects. Each socket has
exactly one owner thread: the receiver thread owns `inbound`, the sender thread `outbound`
(zmq sockets are not thread-safe), and each owner closes its own socket.
"""

from __future__ import annotations

from dataclasses import dataclass

import zmq

# Exit never waits longer than this for unsent messages (a dead gateway reads nothing).
LINGER_MS = 1000


@dataclass(frozen=True)
class WorkerChannels:
    context: zmq.Context
    inbound: zmq.Socket  # PULL from --to-worker: Submit, Abort, ControlCall
    outbound: zmq.Socket  # PUSH to --from-worker: Ready, Step, ControlReply, Heartbeat, Fatal

    @classmethod
    def connect(cls, to_worker: str, from_worker: str) -> WorkerChannels:
        context = zmq.Context()
        inbound = context.socket(zmq.PULL)
        inbound.setsockopt(zmq.LINGER, 0)
        inbound.connect(to_worker)
        outbound = context.socket(zmq.PUSH)
        outbound.setsockopt(zmq.LINGER, LINGER_MS)
        outbound.connect(from_worker)
        return cls(context=context, inbound=inbound, outbound=outbound)
