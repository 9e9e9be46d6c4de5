"""The two ZeroMQ endpoints a gateway and its worker share.

PUSH/PULL in each direction: gateway PUSH -> worker PULL carries Submit/Abort/ControlCall,
worker PUSH -> gateway PULL carries Ready/Step/ControlReply/Heartbeat/Fatal.

A local worker: the gateway binds both `ipc://` endpoints; the worker connects, so the
addresses survive worker restarts. A worker on another host (`vllm-omni-mlx worker --listen
tcp://HOST:PORT`): the worker host binds `tcp://HOST:PORT` (to the worker) and
`tcp://HOST:PORT+1` (from the worker) and the gateway connects to both, so the gateway
survives the host's restarts and the host survives the gateway's.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

_TCP = re.compile(r"^tcp://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.*-]+):(?P<port>[0-9]{1,5})$")


class BadAddress(ValueError):
    """Not a `tcp://HOST:PORT` address (PORT + 1 must be a port too)."""


def parse_tcp(address: str) -> tuple[str, int]:
    """(host, port) of `tcp://HOST:PORT`; BadAddress if it is not one."""
    match = _TCP.match(address.strip())
    if match is None:
        raise BadAddress(f"{address!r} is not tcp://HOST:PORT")
    port = int(match["port"])
    if not 1 <= port <= 65534:
        raise BadAddress(f"{address!r}: the port must be 1-65534 (PORT and PORT + 1 are used)")
    return match["host"], port


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

    @classmethod
    def tcp(cls, address: str) -> Endpoints:
        """A worker host's pair: `tcp://HOST:PORT` to the worker, PORT + 1 from it."""
        host, port = parse_tcp(address)
        return cls(to_worker=f"tcp://{host}:{port}", from_worker=f"tcp://{host}:{port + 1}")
