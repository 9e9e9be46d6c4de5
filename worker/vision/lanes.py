"""A Qwen-VL vision block on two CPU streams: its elementwise work on both cores, the same floats.

On the CPU most of a Qwen-VL vision block's time is not its matrix products (BLAS, on every
core) but its elementwise functions, which MLX computes on one core, an element at a time: the
softmax's exponentials over each segment's scores and the MLP's activation (Qwen2-VL's
sigmoid GELU, Qwen3-VL's tanh GELU, Qwen2.5-VL's SiLU). On the benchmark tower (384 wide, a
224 x 224 picture: 256 patches) a block took ~20 ms, ~14 ms of it in those functions.

`laned_block(block, ...)` computes mlx-vlm's block with that work split in two halves, the
second on the side stream (worker/runtime/side_stream.py): the rotary embedding of the keys
beside that of the queries, half of the heads' attention in each segment, half of the MLP's
rows through its activation. The matrix products stay whole on the run's own stream. Every
element is computed by the same operations on the same inputs as in the block's own call (an
attention head reads only its own slice of q, k and v; an elementwise function reads only its
element), so the output is the block's bit for bit (tests/unit/test_vision_lanes.py, the three
families). The vision engine uses it on the CPU for a block that runs whole (no streamed
request paced beside it: worker/vision/paced.py); off the CPU one stream already has the
device.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from worker.runtime.side_stream import on_both_cores, side_stream
from worker.vision.slicing import attention_call


def laned_block(
    block: Any, hidden_states: mx.array, cu_seqlens: mx.array, rotary_pos_emb: mx.array
) -> mx.array:
    """`block(hidden_states, cu_seqlens, rotary_pos_emb)` (a Qwen-VL vision block), its
    elementwise work split over two streams; see the module docstring."""
    attn = block.attn
    module = sys.modules[type(attn).__module__]
    rotary = module.apply_rotary_pos_emb_vision
    attend = attention_call(module, attn.scale)
    total = hidden_states.shape[0]
    heads = attn.num_heads
    half = heads // 2

    qkv = attn.qkv(block.norm1(hidden_states))
    q, k, v = mx.split(qkv.reshape(total, 3, heads, -1).transpose(1, 0, 2, 3), 3)
    q = rotary(mx.expand_dims(q, 0), rotary_pos_emb)[0]
    with mx.stream(side_stream()):
        k = rotary(mx.expand_dims(k, 0), rotary_pos_emb)[0]
    q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))

    def segment(a: int, b: int, heads: slice) -> Callable[[], mx.array]:
        return lambda: attend(q[:, heads, a:b], k[:, heads, a:b], v[:, heads, a:b])

    bounds: list[int] = [int(b) for b in cu_seqlens.tolist()]  # type: ignore[union-attr, arg-type]
    outputs = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        if b <= a:
            continue  # an empty window (mlx-vlm's split gives it no rows either)
        first, second = segment(a, b, slice(None, half)), segment(a, b, slice(half, None))
        outputs.append(on_both_cores(first, second, axis=1))
    out = mx.concatenate(outputs, axis=2).transpose(0, 2, 1, 3).reshape(total, -1)
    hidden_states = hidden_states + attn.proj(out)
    return hidden_states + _laned_mlp(block.mlp, block.norm2(hidden_states))


def laned(block: Any) -> bool:
    """Whether `laned_block` computes `block` (its MLP has a form `_laned_mlp` knows and its
    attention at least two heads)."""
    return _mlp_form(block.mlp) is not None and getattr(block.attn, "num_heads", 0) >= 2


# The MLPs of the Qwen-VL towers: (input projections, activation, output projection), by the
# modules' attribute names; the activation takes the projections' outputs, elementwise.
_MLP_FORMS: tuple[tuple[tuple[str, ...], Callable[[Any], Any], str], ...] = (
    (("fc1",), lambda mlp: mlp.activation_fn, "fc2"),  # Qwen2-VL
    (("linear_fc1",), lambda mlp: mlp.act_fn, "linear_fc2"),  # Qwen3-VL
    (("gate_proj", "up_proj"), lambda mlp: lambda g, u: nn.silu(g) * u, "down_proj"),  # 2.5
)


def _mlp_form(mlp: Any) -> tuple[tuple[str, ...], Callable[[Any], Any], str] | None:
    for form in _MLP_FORMS:
        inputs, _, output = form
        if all(hasattr(mlp, name) for name in (*inputs, output)):
            return form
    return None


def _laned_mlp(mlp: Any, x: mx.array) -> mx.array:
    """`mlp(x)`, the activation of the second half of the rows on the side stream."""
    form = _mlp_form(mlp)
    assert form is not None  # (`laned` said so)
    inputs, activation, output = form
    act = activation(mlp)
    projected = [getattr(mlp, name)(x) for name in inputs]
    half = x.shape[0] // 2
    activated = on_both_cores(
        lambda: act(*(p[:half] for p in projected)),
        lambda: act(*(p[half:] for p in projected)),
        axis=0,
    )
    return getattr(mlp, output)(activated)
