"""Every rank's scheduler makes rank 0's decisions, in the same order: the lockstep.

The model's collectives (the `all_sum`s of a tensor-parallel layer, a pipeline's hand-offs)
only meet when every rank runs the same forward passes with the same shapes, so every rank
runs the same scheduler (worker/runtime/scheduler.py) over the same engines, and rank 0 tells
the others, once per iteration, what it saw: the aborted request ids, the Submits and the
shutdown request that arrived, and the requests whose deadline passed (by rank 0's clock).
The rest of an iteration (admission in FIFO order, one step of the text engine, its prefix
cache, the samplers' seeds: worker/text/sampling.py `use_seed_source`) is deterministic given
those. The engines' results on the other ranks are dropped (`DroppedOutbox`): rank 0 alone
speaks to the gateway.

One iteration costs one scalar `all_sum` when nothing arrived, two when something did.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgpack

from protocol.codec import decode, encode
from protocol.messages import Step, Submit
from worker.runtime.handoff import InboxItem, ShutdownRequest

if TYPE_CHECKING:
    from worker.distributed.group import Group

log = logging.getLogger("worker")

# Seconds an idle group's ranks wait between Rounds: the most a request arriving at an idle
# group waits, and what keeps the idle ranks from spinning in a collective.
IDLE_PAUSE = 0.02


@dataclass(slots=True)
class Round:
    """What one scheduler iteration starts from."""

    aborted: set[str] = field(default_factory=set)
    items: list[InboxItem] = field(default_factory=list)
    expired: list[str] | None = None  # None: the scheduler reads its own clock

    def is_empty(self) -> bool:
        return not (self.aborted or self.items or self.expired)


def encode_round(round_: Round) -> bytes:
    submits = [encode(i) for i in round_.items if isinstance(i, Submit)]
    shutdown = any(isinstance(i, ShutdownRequest) for i in round_.items)
    return msgpack.packb(
        [sorted(round_.aborted), submits, shutdown, list(round_.expired or [])], use_bin_type=True
    )


def decode_round(frame: bytes) -> Round:
    aborted, submits, shutdown, expired = msgpack.unpackb(frame, raw=False)
    items: list[InboxItem] = []
    for raw in submits:
        submit = decode(raw)
        assert isinstance(submit, Submit)
        items.append(submit)
    if shutdown:
        items.append(ShutdownRequest(call_id=0))  # the other ranks reply to no one
    return Round(set(aborted), items, list(expired))


class Lockstep:
    """Shares each iteration's Round from rank 0 with every rank."""

    def __init__(self, group: Group) -> None:
        self.group = group

    def round(self, collect: Callable[[], Round], idle: bool = False) -> Round:
        """Rank 0: `collect()` (its handoff and clock), sent to all; others: what rank 0 sent.

        The backends' collectives busy-wait (the ring spins a core while it waits), so an
        idle group does not wait inside one: rank 0 waits up to IDLE_PAUSE for an arrival
        (the scheduler's idle wait) and the others sleep as long before joining it."""
        if not self.group.is_leader and idle:
            time.sleep(IDLE_PAUSE)
        if self.group.is_leader:
            mine = collect()  # with its expiries: the scheduler passes its clock
            self.group.share(None if mine.is_empty() else encode_round(mine))
            return mine
        frame = self.group.share(None)
        return Round(expired=[]) if frame is None else decode_round(frame)


class DroppedOutbox:
    """The outbox of a rank that does not speak to the gateway: what is put is dropped, but
    a request that failed is logged (rank 0 reports it to the client)."""

    def put(self, message: object) -> None:
        if isinstance(message, Step):
            for delta in message.deltas:
                if delta.error is not None:
                    log.warning("request %s failed here: %s", delta.request_id, delta.error.message)
