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

`install(model)` puts it where an mlx-lm model's attention modules look it up (their module's
`scaled_dot_product_attention`), on the CPU; the fused decode-and-prefill pass
(worker/text/fused_forward.py) calls it directly.
"""

from __future__ import annotations

import sys
from typing import Any

import mlx.core as mx
from mlx_lm.models.base import scaled_dot_product_attention as stock

from worker.runtime.side_stream import side_stream

MIN_SCORES = 1 << 16  # scores (heads x queries x keys x rows) below which a call stays whole


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
    first = mx.fast.scaled_dot_product_attention(
        queries[:, :q_split], keys[:, kv_first], values[:, kv_first], scale=scale, mask=mask
    )
    with mx.stream(side_stream()):
        second = mx.fast.scaled_dot_product_attention(
            queries[:, q_split:], keys[:, kv_second], values[:, kv_second], scale=scale, mask=mask
        )
    return mx.concatenate([first, second], axis=1)


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
    if isinstance(mask, mx.array) and mask.ndim == 4 and mask.shape[1] != 1:
        return None  # a mask per head
    if kv_heads == 1:
        return heads // 2, None
    per_kv = heads // kv_heads
    return (kv_heads // 2) * per_kv, kv_heads // 2


def install(model: Any) -> bool:
    """Makes the modules of `model`'s attention layers call `attention` (on the CPU; False,
    nothing changed, elsewhere or where none calls mlx-lm's function)."""
    if mx.default_device() != mx.cpu:
        return False
    layers = getattr(getattr(model, "model", None), "layers", None) or getattr(model, "layers", [])
    installed = False
    for layer in layers:
        module = sys.modules.get(type(getattr(layer, "self_attn", None)).__module__)
        if getattr(module, "scaled_dot_product_attention", None) in (stock, attention):
            module.scaled_dot_product_attention = attention  # type: ignore[union-attr]
            installed = True
    return installed
