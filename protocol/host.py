"""The few messages between a gateway and a worker host (`vllm-omni-mlx worker --listen`).

A worker host runs one worker on another machine and relays the worker's frames both ways
unchanged; these two messages are the only ones it reads or writes itself. They travel on the
same two sockets as the worker's traffic (gateway -> host with Submit / Abort / ControlCall,
host -> gateway with Ready / Step / ...); the host tells them apart by the tag, the second
byte of every frame (a msgpack fixarray followed by a fixint tag).

- `HostCommand("start", generation, replace_pid)`: make sure a worker runs (spawn one if
  there is none, without waiting out a restart backoff; replace it if it is `replace_pid`,
  the worker the gateway gave up on); answered by `HostEvent("started", generation, pid)`,
  then, when that worker has already loaded, its READY again. Idempotent.
- `HostCommand("stop", generation)`: stop the worker (SIGTERM, then SIGKILL); the host then
  stays idle until the next start. Answered by `HostEvent("exited", ...)`.
- `HostEvent("loading", 0, pid)`: sent every LOADING_INTERVAL while the worker loads, so the
  link is never silent before its READY (after it, the worker's own heartbeats are).
- `HostEvent("exited", generation, pid, detail)`: the worker ended (`detail` says how); the host
  restarts a crashed one by itself (with backoff), saying `HostEvent("started", 0, pid)`.

These messages are additive: a worker's own traffic is unchanged, so PROTOCOL_VERSION stays.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Union

from protocol.wire import WireEnum, WireStruct


class HostTag(IntEnum):
    """Tags of the host messages; disjoint from protocol.messages.Tag."""

    HOST_COMMAND = 8
    HOST_EVENT = 24


class HostAction(WireEnum):
    START = "start"
    STOP = "stop"


class HostEventKind(WireEnum):
    STARTED = "started"
    LOADING = "loading"  # every LOADING_INTERVAL while the worker loads (it sends nothing yet)
    EXITED = "exited"


LOADING_INTERVAL = 0.5  # seconds


class HostCommand(WireStruct, tag=int(HostTag.HOST_COMMAND)):
    action: HostAction
    generation: int  # the gateway's count of its start / stop commands: replies carry it
    # start: the pid of the worker the gateway gave up on (0: none); if it still runs, the
    # host replaces it by a fresh one instead of adopting it
    replace_pid: int = 0


class HostEvent(WireStruct, tag=int(HostTag.HOST_EVENT)):
    event: HostEventKind
    generation: int  # the command this answers; 0: the host did it by itself (a restart)
    pid: int  # the worker process, on the host's machine
    detail: str = ""  # exited: how ("exited with code 1", "was killed by signal 9 (SIGKILL)")


HostMessage = Union[HostCommand, HostEvent]  # noqa: UP007
HOST_MESSAGES: tuple[type[WireStruct], ...] = (HostCommand, HostEvent)


def frame_tag(frame: bytes) -> int | None:
    """The tag of an encoded message without decoding it (None if it is not a small array
    led by a small integer, which every message of this protocol is)."""
    if len(frame) >= 2 and frame[0] & 0xF0 == 0x90 and frame[1] < 0x80:
        return frame[1]
    return None
