"""The MLX thread's loop: the scheduler, run on the calling thread under mlx-lm's wired limit.

Both kinds of worker process run it: rank 0 (worker/runtime/process.py, with its sockets)
and every other rank of a distributed group (worker/distributed/follower.py, without).
"""

from __future__ import annotations

import queue
from typing import Any

from worker.distributed.lockstep import IDLE_PAUSE
from worker.runtime.handoff import Handoff
from worker.runtime.scheduler import IDLE_WAIT, Scheduler
from worker.runtime.stats import WorkerStats


def run_scheduler(
    engines: list[Any],
    model: Any,
    handoff: Handoff,
    outbox: queue.SimpleQueue[Any],
    stats: WorkerStats,
    max_num_seqs: int,
    lockstep: Any = None,
) -> None:
    """Run the scheduler until it stops (a shutdown, or a fatal error it reports)."""
    scheduler = Scheduler(
        engines=engines,
        handoff=handoff,
        outbox=outbox,
        stats=stats,
        max_num_seqs=max_num_seqs,
        # A group's ranks meet at every iteration: an idle rank 0 must not keep them waiting.
        idle_wait=IDLE_PAUSE if lockstep is not None else IDLE_WAIT,
        lockstep=lockstep,
    )
    if model is None:  # speech only
        scheduler.run()
        return
    from mlx_lm.generate import generation_stream, wired_limit

    # mlx-lm's own generate functions run under this (it raises the wired memory limit on Metal).
    with wired_limit(model, [generation_stream]):  # type: ignore[list-item]  # a Stream at run time
        scheduler.run()
