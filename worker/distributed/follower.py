"""A rank of a distributed worker: joining the group, and the ranks other than 0.

`join_group` is what every rank does first: join the group mlx.launch set up, agree on the
samplers' seed sequence, and make the Sharder that splits the model at load. Rank 0 then goes
on as a worker (worker/runtime/process.py: sockets, Ready, the scheduler, with the Lockstep);
every other rank runs `run_follower`: the same engines and scheduler, driven by rank 0's
Rounds, with no sockets and an outbox that drops what it is given. A follower that fails
exits 1; mlx.launch then stops the group, and the gateway's supervisor restarts it.
"""

from __future__ import annotations

import argparse
import logging
import queue

from worker.distributed.lockstep import DroppedOutbox, Lockstep
from worker.distributed.sharding import Sharder

log = logging.getLogger("worker")


def join_group(args: argparse.Namespace) -> tuple[Lockstep, Sharder]:
    from worker.distributed.group import Group
    from worker.text.sampling import use_seed_source

    group = Group.join(args.distributed_backend)
    use_seed_source(group.shared_seed())
    return Lockstep(group), Sharder(group.group, args.parallel)


def run_follower(args: argparse.Namespace) -> int:
    """Runs a rank other than 0 until rank 0's shutdown (0) or a failure (1)."""
    from worker.runtime.handoff import Handoff
    from worker.runtime.loading import load_engines
    from worker.runtime.mlx_thread import run_scheduler
    from worker.runtime.stats import WorkerStats
    from worker.text.args import check_blas

    try:
        check_blas(args.blas)
        lockstep, sharder = join_group(args)
        rank = lockstep.group.rank
        loaded = load_engines(args, sharder)
        lockstep.group.barrier()
        log.info("rank %d of %d ready: %s parallel", rank, lockstep.group.size, sharder.mode)
    except Exception:
        log.exception("this rank cannot load %s", args.model)
        return 1
    outbox: queue.SimpleQueue = DroppedOutbox()  # type: ignore[assignment]
    try:
        run_scheduler(
            loaded.engines, loaded.model, Handoff(), outbox, WorkerStats(model=args.model),
            args.max_num_seqs, lockstep,
        )  # fmt: skip
    except Exception:
        log.exception("rank %d's loop failed", rank)
        return 1
    finally:
        loaded.close()
    log.info("rank %d shut down", rank)
    return 0
