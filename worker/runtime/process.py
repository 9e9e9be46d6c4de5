"""The worker process entry point: `python -m worker --model PATH --to-worker ... ...`.

`run_worker_process` sets up logging (stderr) and the parent watchdog, connects the sockets,
starts the IO threads, loads the model on this (main) thread, sends Ready (or Fatal and exits
1), then runs the scheduler on this same thread: the one thread that ever touches MLX. A
top-level guard turns anything unexpected in the loop into Fatal + exit 1; the gateway
restarts the worker.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import queue
import signal
import sys
import traceback
from collections.abc import Sequence

from protocol.log_format import LOG_FORMATS, configure_logging
from protocol.messages import PROTOCOL_VERSION, Fatal, Ready
from worker.distributed.args import add_distributed_arguments, is_leader_rank
from worker.runtime.channels import WorkerChannels
from worker.runtime.handoff import Handoff
from worker.runtime.io_threads import Receiver, Sender
from worker.runtime.loading import add_engine_arguments
from worker.runtime.mlx_thread import run_scheduler
from worker.runtime.parent_watchdog import install_parent_watchdog
from worker.runtime.stats import WorkerStats
from worker.text.args import add_generation_arguments, check_generation_arguments

log = logging.getLogger("worker")

_CLOSE_TIMEOUT_S = 3.0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m worker", description=__doc__)
    parser.add_argument("--model", required=True, help="local checkpoint directory")
    parser.add_argument("--to-worker", required=True, help="endpoint to PULL requests from")
    parser.add_argument("--from-worker", required=True, help="endpoint to PUSH replies to")
    parser.add_argument("--parent-pid", type=int, required=True, help="exit when it exits")
    parser.add_argument("--max-num-seqs", type=int, default=8, help="requests generated at once")
    parser.add_argument("--heartbeat-interval", type=float, default=0.5, help="seconds")
    add_generation_arguments(parser)
    add_engine_arguments(parser)
    add_distributed_arguments(parser)
    parser.add_argument(
        "--log-level",
        type=str.lower,
        default="info",
        choices=["debug", "info", "warning", "error", "critical"],
    )
    parser.add_argument("--log-format", default="text", choices=LOG_FORMATS)
    args = parser.parse_args(argv)
    if args.max_num_seqs < 1:
        parser.error("--max-num-seqs must be at least 1")
    if args.heartbeat_interval <= 0:
        parser.error("--heartbeat-interval must be positive")
    check_generation_arguments(parser, args)
    return args


def run_worker_process(args: argparse.Namespace) -> int:
    """Runs the worker until shutdown (0) or a fatal error (1); returns the exit code."""
    configure_logging(args.log_level, args.log_format, "worker")
    if args.distributed:  # a rank: mlx.launch is our parent, and dies with the gateway
        install_parent_watchdog(os.getppid())
    else:
        install_parent_watchdog(args.parent_pid)
    # Ctrl-C in a terminal reaches the whole process group: the gateway decides when its worker
    # stops (shutdown call, or its own death via the watchdog), not the keyboard.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The worker loads local directories only: never turn a missing file into a hub call.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.distributed and not is_leader_rank():
        from worker.distributed.follower import run_follower

        return run_follower(args)

    channels = WorkerChannels.connect(args.to_worker, args.from_worker)
    handoff = Handoff()
    outbox: queue.SimpleQueue = queue.SimpleQueue()
    stats = WorkerStats(model=args.model)
    receiver = Receiver(channels.inbound, handoff, outbox, stats)
    sender = Sender(channels.outbound, outbox, stats, args.heartbeat_interval)
    receiver.start()
    sender.start()

    code = _serve(args, handoff, outbox, stats, sender, receiver)

    receiver.stop()
    receiver.join(_CLOSE_TIMEOUT_S)
    if not sender.close(_CLOSE_TIMEOUT_S) or receiver.is_alive():
        log.warning("IO threads did not stop in time; exiting without a clean close")
        sys.stderr.flush()
        os._exit(code)
    channels.context.term()
    return code


def _serve(
    args: argparse.Namespace,
    handoff: Handoff,
    outbox: queue.SimpleQueue,
    stats: WorkerStats,
    sender: Sender,
    receiver: Receiver,
) -> int:
    # Imported here so that a broken MLX install is reported as Fatal like any load failure.
    lockstep = None
    try:
        from worker.runtime.loading import load_engines
        from worker.text.args import check_blas

        check_blas(args.blas)
        sharder = None
        if args.distributed:
            from worker.distributed.follower import join_group

            lockstep, sharder = join_group(args)
        log.info("loading %s", args.model)
        loaded = load_engines(args, sharder)
        if lockstep is not None:
            lockstep.group.barrier()  # every rank loaded
            log.info("rank 0 of %d: %s parallel", lockstep.group.size, sharder.mode)
    except Exception as exc:
        log.exception("cannot load %s", args.model)
        outbox.put(_fatal("the model failed to load", exc))
        return 1

    if loaded.tokenizer is not None:
        from worker.text.token_counting import TokenizerCalls

        # count_tokens, tokenize and detokenize are answered on the receiver thread
        # (tokenizer only, no MLX).
        max_context = loaded.text.max_context if loaded.text is not None else None
        receiver.set_tokenizer(TokenizerCalls(loaded.tokenizer, max_context))
    # The libraries and the model are ~100K Python objects that live as long as the worker; a
    # full collection walks them all (50-200 ms on the 2-core CI machine, a pause in the middle
    # of some decode step). Frozen, collections walk only what requests create.
    gc.collect()
    gc.freeze()
    outbox.put(
        Ready(
            protocol_version=PROTOCOL_VERSION,
            pid=os.getpid(),
            model=args.model,
            capabilities=loaded.capabilities,
            max_num_seqs=args.max_num_seqs,
            text=loaded.text,
            speech=loaded.speech,
            transcription=loaded.transcription,
            embedding=loaded.embedding,
            score=loaded.score,
            image=loaded.image,
            video=loaded.video,
        )
    )
    sender.enable_heartbeats()
    log.info("ready: %s (%s)", args.model, ", ".join(loaded.capabilities))

    try:
        run_scheduler(
            loaded.engines, loaded.model, handoff, outbox, stats, args.max_num_seqs, lockstep
        )
    except Exception as exc:
        log.exception("worker loop failed")
        outbox.put(_fatal("the worker loop failed", exc))
        return 1
    finally:
        loaded.close()
    log.info("shut down")
    return 0


def _fatal(what: str, exc: Exception) -> Fatal:
    """`message` is short and safe to show anyone (the kind of failure); `detail` has the
    exception's text and traceback, which can name files, for the gateway's log."""
    return Fatal(f"{what} ({type(exc).__name__})", f"{exc}\n{traceback.format_exc()}")


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run_worker_process(parse_args(argv)))
