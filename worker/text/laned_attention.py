"""A language model's attention on two CPU streams: half the heads on the other core, same floats.

On the CPU, MLX's `scaled_dot_product_attention` is matrix products (BLAS, every core) and a
softmax whose `exp` MLX computes on one core, an element at a time (~14 ns each on the
development machine). A long prompt's prefill is mostly that softmax: for Qwen2.5-0.5B (14
query heads, 2 KV heads) one layer's attention over a 2,048-token chunk after 6,000 tokens of
context took 4.1 s, so the 7,236-token prompt of an OpenCode session took 257 s to prefill,
nine tenths of it in softmaxes.

`attention` computes the same call with the heads split in two groups along the KV heads
(with one KV head, along the query heads), the second group on the side stream
(worker/runtime/side_stream.py): 2.4 s for that layer. Each head is computed by the same
operations on the same slices as in the whole call (a head reads only its own queries and its
KV head), so the output is mlx-lm's bit for bit (tests/unit/test_laned_attention.py). Calls
with fewer than `MIN_SCORES` scores (a decode step over a short context) stay whole: splitting
them costs more than it saves. Off the CPU, with attention sinks, a per-head mask or a
quantized KV cache, mlx-lm's own function runs.

`install(model)` puts it where an mlx-lm model's attention modules look it up (the globals of
their `__call__`: the model family's module, for the whole process), on the CPU; the fused
decode-and-prefill pass (worker/text/fused_forward.py) calls it directly. `uninstalled()` puts
mlx-lm's own back for a while: the references tests compare with are the library as shipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mlx.core as mx
from mlx_lm.models.base import scaled_dot_product_attention as stock

from worker.runtime.side_stream import on_both_cores

MIN_SCORES = 1 << 16  # scores (heads x queries x keys x rows) below which a call stays whole
NAME = "scaled_dot_product_attention"  # what mlx-lm's attention modules call
_PATCHED: list[dict[str, Any]] = []  # the module globals `install` changed


def attention(
    queries: mx.array,
    keys: mx.array,
    values: mx.array,
    cache: Any,
    scale: float,
    mask: Any,
    sinks: mx.array | None = None,
) -> mx.array:
    """mlx-lm's `scaled_dot_product_attention(queries, keys, values, cache, scale, mask,
    sinks)`, half the heads on the side stream; see the module docstring."""
    split = _split(queries, keys, cache, mask, sinks)
    if split is None:
        return stock(queries, keys, values, cache, scale=scale, mask=mask, sinks=sinks)
    q_split, kv_split = split
    kv_first = slice(None) if kv_split is None else slice(None, kv_split)
    kv_second = slice(None) if kv_split is None else slice(kv_split, None)

    def heads(q: slice, kv: slice) -> mx.array:
        return mx.fast.scaled_dot_product_attention(
            queries[:, q], keys[:, kv], values[:, kv], scale=scale, mask=mask
        )

    return on_both_cores(
        lambda: heads(slice(None, q_split), kv_first),
        lambda: heads(slice(q_split, None), kv_second),
        axis=1,
    )


def _split(
    queries: mx.array, keys: mx.array, cache: Any, mask: Any, sinks: mx.array | None
) -> tuple[int, int | None] | None:
    """(query heads in the first group, KV heads in it or None for all) where the call is
    split; None where it stays whole."""
    if mx.default_device() != mx.cpu or sinks is not None or hasattr(cache, "bits"):
        return None
    if queries.ndim != 4 or keys.ndim != 4:
        return None
    rows, heads, length, _ = queries.shape
    kv_heads, keys_length = keys.shape[1], keys.shape[2]
    if heads < 2 or heads % kv_heads or rows * heads * length * keys_length < MIN_SCORES:
        return None
    if isinstance(mask, mx.array) and mask.ndim >= 3 and mask.shape[-3] != 1:
        return None  # a mask per head
    if kv_heads == 1:
        return heads // 2, None
    per_kv = heads // kv_heads
    return (kv_heads // 2) * per_kv, kv_heads // 2


def install(model: Any) -> bool:
    """Makes `model`'s attention modules call `attention` where they call mlx-lm's function
    (on the CPU; False, nothing changed, elsewhere or where none calls it)."""
    if mx.default_device() != mx.cpu:
        return False
    installed = False
    for module in model.modules():
        names = getattr(type(module).__call__, "__globals__", None)  # where its call looks
        if names is None or names.get(NAME) not in (stock, attention):
            continue
        names[NAME] = attention
        if not any(names is patched for patched in _PATCHED):
            _PATCHED.append(names)
        installed = True
    return installed


@contextmanager
def uninstalled() -> Iterator[None]:
    """mlx-lm's own function wherever `install` put `attention`, for the duration."""
    patched = [names for names in _PATCHED if names.get(NAME) is attention]
    for names in patched:
        names[NAME] = stock
    try:
        yield
    finally:
        for names in patched:
            names[NAME] = attention
