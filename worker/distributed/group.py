"""The worker's MLX distributed group: who we are in it, and rank 0's bytes sent to every rank.

Every exchange is a collective (`all_sum` on the CPU stream, which every backend has): rank 0
contributes the payload, the other ranks zeros, so all of them end up holding rank 0's bytes.
An empty payload costs one scalar `all_sum`; a payload, two (its size, then the bytes).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_lm.generate import generation_stream


@dataclass(frozen=True)
class Group:
    """This process's place in the distributed group."""

    group: Any  # mx.distributed.Group

    @classmethod
    def join(cls, backend: str = "any") -> Group:
        """Joins the group mlx.launch set up (raises when there is none, or it has one rank)."""
        group = mx.distributed.init(strict=True, backend=backend)
        if group.size() < 2:
            raise RuntimeError("the distributed group has one rank: give two or more")
        return cls(group)

    @property
    def rank(self) -> int:
        return self.group.rank()

    @property
    def size(self) -> int:
        return self.group.size()

    @property
    def is_leader(self) -> bool:
        return self.rank == 0

    def share(self, payload: bytes | None) -> bytes | None:
        """Rank 0's `payload` (None: nothing) on every rank; the other ranks pass None.

        The model's own collectives may still be queued on the generation stream (mlx-lm's
        generators `async_eval` the next step before returning this one): they are waited
        for first, so every rank's collectives meet in the same order."""
        mx.synchronize(generation_stream)
        mine = len(payload) if self.is_leader and payload else 0
        size = int(mx.distributed.all_sum(mx.array(mine), group=self.group, stream=mx.cpu).item())
        if size == 0:
            return None
        if self.is_leader:
            assert payload is not None
            data = mx.array(memoryview(payload), dtype=mx.uint8)
        else:
            data = mx.zeros((size,), dtype=mx.uint8)
        summed = mx.distributed.all_sum(data, group=self.group, stream=mx.cpu)
        mx.eval(summed)
        return bytes(memoryview(summed))

    def shared_seed(self) -> int:
        """One random 63-bit seed, drawn by rank 0, the same on every rank."""
        mine = secrets.randbits(63).to_bytes(8, "little") if self.is_leader else None
        shared = self.share(mine)
        assert shared is not None
        return int.from_bytes(shared, "little")

    def barrier(self) -> None:
        mx.eval(mx.distributed.all_sum(mx.array(1.0), group=self.group, stream=mx.cpu))
