"""Rewinding a batch's KV cache past each row's rejected tokens, as if never fed.

The speculating generation batch keeps its rows in a `RaggedKVCache` (ragged_cache.py): each
row ends at a length of its own, so dropping row i's last `rejected[i]` positions is lowering
its length (nothing moves; the next write lands there). mlx-lm's BatchKVCache right-aligns its
rows at one index, so the same rewind would move every row's whole history (a roll, O(context)
per step). What stays is exactly the keys and values the kept tokens were given, at the
positions they had.
"""

from __future__ import annotations

from typing import Any

from mlx_lm.models.cache import BatchKVCache, KVCache

from worker.text.speculation.ragged_cache import RaggedKVCache


def rewind(layers: list[RaggedKVCache], rejected: list[int]) -> None:
    """Drops the last `rejected[i]` positions of row i in every layer."""
    if any(rejected):
        for cache in layers:
            cache.trim_rows(rejected)


def ragged(layers: list[Any]) -> list[Any]:
    """The layers as RaggedKVCache (BatchKVCache rows converted; anything else as it is)."""
    return [RaggedKVCache.from_batch(c) if isinstance(c, BatchKVCache) else c for c in layers]


def trimmed(cache: list[KVCache], drop: int) -> list[KVCache]:
    """One sequence's extracted cache without its last `drop` positions (in place)."""
    if drop:
        for layer in cache:
            layer.trim(drop)
    return cache


def rewindable(cache_layers: list[Any]) -> str | None:
    """Why a batch of these per-layer caches cannot be rewound per row (None: it can). Plain
    KV caches batch into BatchKVCache; rotating, quantized, chunked and recurrent (Mamba,
    linear attention) caches cannot drop a row's last positions."""
    kinds = sorted(
        {type(c).__name__ for c in cache_layers if type(c) not in (KVCache, BatchKVCache)}
    )
    if kinds:
        return f"its KV cache ({', '.join(kinds)}) cannot be rewound past rejected tokens"
    return None
