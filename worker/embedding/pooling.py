"""Pooling token states into one vector per row, as sentence-transformers' Pooling module does.

`hidden` is (rows, length, width) from one padded pass, `mask` (rows, length) with 1 on real
tokens; rows are right-padded, so a row's last real token is at `lengths - 1`. Padding never
reaches a vector: mean and max see only real tokens, cls is the first, lasttoken the last real
one. Computed in float32 whatever the model's dtype.
"""

from __future__ import annotations

import mlx.core as mx


def pool(hidden: mx.array, mask: mx.array, mode: str) -> mx.array:
    """(rows, width) float32 vectors of `mode` (worker.embedding.checkpoint.POOLING_MODES)."""
    hidden = hidden.astype(mx.float32)
    weights = mask.astype(mx.float32)[..., None]
    counts = mx.maximum(weights.sum(axis=1), 1e-9)
    if mode == "cls":
        return hidden[:, 0]
    if mode == "mean":
        return (hidden * weights).sum(axis=1) / counts
    if mode == "mean_sqrt_len":
        return (hidden * weights).sum(axis=1) / mx.sqrt(counts)
    if mode == "max":
        return mx.where(weights > 0, hidden, mx.array(-1e9, mx.float32)).max(axis=1)
    if mode == "lasttoken":
        last = mask.astype(mx.int32).sum(axis=1) - 1
        return mx.take_along_axis(hidden, last[:, None, None], axis=1)[:, 0]
    raise ValueError(f"unknown pooling {mode!r}")


def normalize(vectors: mx.array) -> mx.array:
    """Unit length rows (sentence-transformers' Normalize: L2, zero rows stay zero)."""
    norms = mx.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / mx.maximum(norms, 1e-12)
