"""The worker's distributed flags (passed by the gateway to every rank, through mlx.launch)."""

from __future__ import annotations

import argparse
import os

from worker.distributed.sharding import PARALLEL_MODES

RANK_ENV = "MLX_RANK"  # set by mlx.launch for each process it starts


def add_distributed_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--distributed", action="store_true", help="a rank of an MLX distributed group")
    add("--parallel", default="auto", choices=PARALLEL_MODES, help="how the model is split")
    add("--distributed-backend", default="any", help="MLX's backend: ring, jaccl, mpi, nccl")


def is_leader_rank() -> bool:
    """Rank 0 (or no group): the rank that speaks to the gateway."""
    return os.environ.get(RANK_ENV, "0") == "0"
