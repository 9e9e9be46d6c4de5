"""One forward pass over the decoding rows and a prefill chunk together (vLLM's chunked prefill).

mlx-lm's `BatchGenerator` runs a decode step and a prefill chunk as two model calls: two passes
over every weight, and two sets of per-op costs. Beside decoding streams the prefill pacer
(worker/text/prefill_pacing.py) keeps chunks small, so the second pass costs about as much as
the first whatever its size, and it sets a floor under the streams' inter-token latency.

Here both run in one pass. The decode rows (B sequences of one token each, or of 1 + K tokens
when speculation verifies K proposed tokens per row: worker/text/speculation/) and the chunk (P
sequences of n tokens) are laid out as one sequence of B + P*n tokens for everything that works
token by token: the embedding, the norms, the q/k/v/o projections and the MLP, so each weight is
read once for both. Only the attention core is per part: each part's queries attend to its own
KV cache, with its own positions and mask, exactly as the model's own attention does it. The
final norm and the LM head see the decode rows only (the chunk's logits are never needed), and
the last layer's attention output, o_proj and MLP are skipped for the chunk: its KV is what
the chunk is for.

Supported: the decoder-only families whose block is `x + attn(norm(x))`, `h + mlp(norm(h))`
with the Llama attention (q/k/v/o projections, optional per-head q_norm/k_norm, RoPE):
`FUSABLE_TYPES`, checked structurally by `fusable`. Anything else runs mlx-lm's two passes.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx_lm.models.base import create_attention_mask

from worker.text.laned_attention import attention

FUSABLE_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3"})
_ATTENTION_PARTS = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "rope",
    "n_heads",
    "n_kv_heads",
    "scale",
)
_BLOCK_PARTS = ("self_attn", "mlp", "input_layernorm", "post_attention_layernorm")


def fusable(model: Any) -> bool:
    """Whether `fused_logits` computes what `model` itself computes (see the module docstring)."""
    if getattr(model, "model_type", None) not in FUSABLE_TYPES:
        return False
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if not layers or not hasattr(inner, "embed_tokens") or not hasattr(inner, "norm"):
        return False
    # Sliding-window layers (llama 4 style) and pipeline-parallel shards mask or route
    # differently from the plain model call.
    if getattr(inner, "swa_idx", None) is not None or getattr(inner, "pipeline_size", 1) != 1:
        return False
    for layer in layers:
        if getattr(layer, "use_sliding", False):
            return False
        if not all(hasattr(layer, part) for part in _BLOCK_PARTS):
            return False
        if not all(hasattr(layer.self_attn, part) for part in _ATTENTION_PARTS):
            return False
    return True


def fused_logits(
    model: Any,
    decode_inputs: mx.array,
    decode_cache: list[Any],
    chunk_inputs: mx.array,
    chunk_cache: list[Any],
) -> mx.array:
    """The logits of the decode rows, (B, W, vocab) for decode inputs (B, W), as
    `model(decode_inputs, decode_cache)` returns them, with the chunk (P, n) fed into
    `chunk_cache` in the same pass, as
    `model(chunk_inputs, chunk_cache)` would feed it. Lazy, like a model call: the caller
    evaluates the logits and the chunk cache's state."""
    inner = model.model
    batch, decode_width = decode_inputs.shape
    rows, width = chunk_inputs.shape
    decode_h = inner.embed_tokens(decode_inputs)
    chunk_h = inner.embed_tokens(chunk_inputs)
    parts = (
        _Part(batch, decode_width, create_attention_mask(decode_h, decode_cache[0])),
        _Part(rows, width, create_attention_mask(chunk_h, chunk_cache[0])),
    )
    dim = decode_h.shape[-1]
    x = mx.concatenate([decode_h.reshape(1, -1, dim), chunk_h.reshape(1, -1, dim)], axis=1)
    last = len(inner.layers) - 1
    for i, (layer, cache_d, cache_c) in enumerate(
        zip(inner.layers, decode_cache, chunk_cache, strict=True)
    ):
        x = _block(layer, x, parts, (cache_d, cache_c), chunk_needed=i < last)
    out = inner.norm(x.reshape(batch, decode_width, dim))
    if getattr(model, "lm_head", None) is not None:
        return model.lm_head(out)
    return inner.embed_tokens.as_linear(out)


class _Part:
    """One part of the fused sequence: `rows` sequences of `width` tokens, and their mask."""

    __slots__ = ("rows", "width", "mask")

    def __init__(self, rows: int, width: int, mask: Any) -> None:
        self.rows, self.width, self.mask = rows, width, mask

    @property
    def tokens(self) -> int:
        return self.rows * self.width


def _block(layer: Any, x: mx.array, parts: tuple, caches: tuple, chunk_needed: bool) -> mx.array:
    """One transformer block over the fused sequence x, (1, B + P*n, dim). Where the chunk's
    output is not needed (the last layer), only the decode rows come out."""
    attn = layer.self_attn
    h = layer.input_layernorm(x)
    q, k, v = attn.q_proj(h), attn.k_proj(h), attn.v_proj(h)
    outputs, start = [], 0
    for part, cache in zip(parts, caches, strict=True):
        end = start + part.tokens
        outputs.append(
            _attend(attn, q[:, start:end], k[:, start:end], v[:, start:end], part, cache)
        )
        start = end
    if not chunk_needed:  # the chunk's keys and values are in its cache: that is all it needs
        x, outputs = x[:, : parts[0].tokens], outputs[:1]
    h = x + attn.o_proj(mx.concatenate(outputs, axis=1) if len(outputs) > 1 else outputs[0])
    return h + layer.mlp(layer.post_attention_layernorm(h))


def _attend(attn: Any, q: mx.array, k: mx.array, v: mx.array, part: _Part, cache: Any) -> mx.array:
    """The model's attention core for one part, from its projected q, k, v (1, rows*width, ·)
    to the output before o_proj (1, rows*width, heads*head_dim)."""
    rows, width = part.rows, part.width
    q = q.reshape(rows, width, attn.n_heads, -1)
    k = k.reshape(rows, width, attn.n_kv_heads, -1)
    if hasattr(attn, "q_norm"):  # qwen3: a norm per head before RoPE
        q, k = attn.q_norm(q), attn.k_norm(k)
    q = q.transpose(0, 2, 1, 3)
    k = k.transpose(0, 2, 1, 3)
    v = v.reshape(rows, width, attn.n_kv_heads, -1).transpose(0, 2, 1, 3)
    q = attn.rope(q, offset=cache.offset)
    k = attn.rope(k, offset=cache.offset)
    k, v = cache.update_and_fetch(k, v)
    out = attention(q, k, v, cache=cache, scale=attn.scale, mask=part.mask)  # (on both cores)
    return out.transpose(0, 2, 1, 3).reshape(1, rows * width, -1)
