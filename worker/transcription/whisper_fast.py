"""Whisper's encoder on a CPU: its attention heads on two MLX streams, the same numbers.

Whisper encodes every 30-second window whole: 1,500 positions, so each encoder layer's
self-attention takes a softmax over 1500 x 1500 scores per head. MLX computes `exp` on the
CPU one element at a time (~14 ns each here), so for Whisper tiny.en those softmaxes are 0.8
of the encoder's 1.24 s on 2 cores, while its matrix products run on BLAS and are quick
(docs/benchmarks.md, "Whisper's encoder"). A CPU stream runs on one thread.

`install(model)` gives the encoder's attention modules (not the decoder's: it attends to a
few tokens at a time) a `qkv_attention` that computes half of the heads on a second CPU
stream (worker/runtime/side_stream.py), so both cores work through the softmaxes. Each head
is computed exactly as mlx-audio's `MultiHeadAttention.qkv_attention` computes it (the same
operations on the same slices; heads do not mix until the output projection), so the
encoder's output is bit for bit the stock one (tests/unit/test_transcription_whisper_fast.py)
and transcripts equal direct mlx-audio. Only where MLX runs on the CPU: on a GPU one stream
already uses the device.
"""

from __future__ import annotations

import types
from typing import Any

import mlx.core as mx

from worker.runtime.side_stream import side_stream


def install(model: Any) -> bool:
    """Two-stream attention in `model`'s (a mlx-audio Whisper) encoder; False (nothing
    changed) off the CPU or for an encoder with fewer than two heads."""
    if mx.default_device() != mx.cpu:
        return False
    blocks = getattr(getattr(model, "encoder", None), "blocks", [])
    attentions = [block.attn for block in blocks if getattr(block.attn, "n_head", 0) >= 2]
    for attention in attentions:
        attention.qkv_attention = types.MethodType(_two_stream_attention, attention)
    return bool(attentions)


def _two_stream_attention(
    self: Any, q: mx.array, k: mx.array, v: mx.array, mask: mx.array | None = None
) -> tuple[mx.array, mx.array]:
    """mlx-audio's `qkv_attention` (MIT licence), its heads split in two halves, the second
    computed on the side stream: (output, scores) as it returns them. Off the CPU (the
    default device changed since `install`), the stock function."""
    if mx.default_device() != mx.cpu:
        return type(self).qkv_attention(self, q, k, v, mask)
    n_batch, n_ctx, n_state = q.shape
    scale = (n_state // self.n_head) ** -0.25
    q = q.reshape(*q.shape[:2], self.n_head, -1).transpose(0, 2, 1, 3) * scale
    k = k.reshape(*k.shape[:2], self.n_head, -1).transpose(0, 2, 3, 1) * scale
    v = v.reshape(*v.shape[:2], self.n_head, -1).transpose(0, 2, 1, 3)

    def heads(first: int, last: int) -> tuple[mx.array, mx.array]:
        qk = q[:, first:last] @ k[:, first:last]
        if mask is not None:
            qk = qk + mask[:n_ctx, :n_ctx]
        w = mx.softmax(qk, axis=-1, precise=True)
        return w @ v[:, first:last], qk

    half = self.n_head // 2
    out_a, qk_a = heads(0, half)
    with mx.stream(side_stream()):
        out_b, qk_b = heads(half, self.n_head)
    out = mx.concatenate([out_a, out_b], axis=1).transpose(0, 2, 1, 3)
    return out.reshape(n_batch, n_ctx, n_state), mx.concatenate([qk_a, qk_b], axis=1)
