"""A Qwen-VL vision block in slices of its rows, each small enough to sit beside a decode step.

On a CPU one block of a vision tower is one MLX call over every patch of the picture (a 448 x
448 picture is 1,024 patches; the benchmark tower's block takes ~160 ms on two cores, a real
one's far more), so while requests decode, a token that waits for a whole block waits tens of
decode steps. The block itself cuts by rows: Qwen2-VL's, Qwen2.5-VL's and Qwen3-VL's block is

    x = x + proj(attention(rotary(q), rotary(k), v))    q, k, v = qkv(norm1(x))
    x = x + mlp(norm2(x))

and every step of it works on rows alone (the norms, the linear layers, the rotary embedding,
the MLP) except attention, where a query row reads the keys and values of its whole segment (a
picture, or a window of one: `cu_seqlens`). So a block runs as two passes of row slices: the
queries, keys and values slice by slice, then, slice by slice, the slice's queries against
their segments' keys and values and everything after. Each output row is computed by the same
operations on the same inputs as in mlx-vlm's own call: a slice of a matrix product is the
product of the slice, and a query row's attention does not depend on the other query rows. The
tower's merger (and Qwen3-VL's deepstack mergers) work on groups of rows alone and are sliced
by groups the same way.

The same bits, too, given one rule: a CPU BLAS may multiply small matrices with other kernels
than large ones (OpenBLAS's "small matrix" sgemm kernels take products of at most 100^3
multiply-adds, `sgemm_small_kernel_permit`, and their results differ in the last bits from the
same rows inside a larger product), so every product a slice makes is more than SMALL_PRODUCT
multiply-adds, and a segment too small to cut so is never cut (a Qwen2.5-VL window is sliced
whole). Tested on the three families, with the bundled BLAS and
with OpenBLAS (tests/unit/test_vision_slicing.py). Off the CPU the kernel chosen for a product
may depend on its shape in other ways, so there blocks stay whole.

How many rows a slice takes is steered by time: after each slice, by the budget over what the
slice took (growing at most MAX_GROWTH a slice), starting from FIRST_ROWS, kept per pass and
segment length across the run's blocks. The budget is the run's (`SliceBudget.seconds`, set by
the vision engine from the decode step it paces against; 0: the least slices); without one (no
streamed request in the decode batch) a block runs whole (on the CPU with its elementwise work
on two streams: worker/vision/lanes.py, the same floats as mlx-vlm's call).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import mlx.core as mx
from mlx.utils import tree_flatten

# The modules whose vision blocks and attention have the shape above (each tested equal).
SLICED_MODULES = frozenset(
    f"mlx_vlm.models.{family}.vision" for family in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
)
SMALL_PRODUCT = 100**3  # multiply-adds a BLAS may compute with its small-matrix kernels
FIRST_ROWS = 32  # rows of a pass's first slice, before anything is measured
MAX_GROWTH = 2.0  # the most one slice's measurement grows the next

Snap = Callable[[int, int], int]  # (start, wanted stop) -> the stop a slice may end at


class SliceBudget:
    """What a run's slices may take: `seconds` (None: no limit, the rest in one slice), and the
    rows each pass settled on, by a key of the pass and its shapes."""

    def __init__(self) -> None:
        self.seconds: float | None = None
        self._rows: dict[tuple[Any, ...], float] = {}

    def slices(
        self, key: tuple[Any, ...], total: int, snap: Snap, pause: Callable[[], None]
    ) -> Iterator[tuple[int, int]]:
        """(start, stop) ranges covering `total` rows, each ending where `snap` allows;
        `pause()` before each. A slice's work is the caller's loop body, which evaluates it, so
        the time from one range to the next is what the slice took."""
        start = 0
        while start < total:
            pause()
            budget = self.seconds  # read once resumed: it may have changed while paused
            if budget is None:
                wanted = total
            elif budget <= 0:
                wanted = start  # the least slice (nothing timed yet to steer by)
            else:
                wanted = start + int(self._rows.get(key, FIRST_ROWS))
            stop = min(total, snap(start, max(start + 1, wanted)))
            began = time.perf_counter()
            yield start, stop
            if budget is not None and budget > 0 and stop < total:
                took = max(time.perf_counter() - began, 1e-6)
                rows = stop - start
                self._rows[key] = min(MAX_GROWTH * rows, rows * budget / took)
            start = stop


def sliceable(module: Any) -> bool:
    """Whether `module` (a vision block or merger) is of the families in SLICED_MODULES."""
    return type(module).__module__ in SLICED_MODULES


def on_cpu() -> bool:
    return bool(mx.default_device() == mx.cpu)


def least_rows(*widths: int) -> int:
    """The fewest rows whose products with (n x k) matrices, n x k in `widths`, are each
    more than SMALL_PRODUCT multiply-adds; two at least (a one-row product may go to a
    matrix-vector kernel)."""
    return max(2, SMALL_PRODUCT // max(1, min(widths)) + 1)


def weight_widths(module: Any) -> list[int]:
    """n x k of each matrix `module`'s rows are multiplied by (its 2-D weights)."""
    leaves: list[tuple[str, Any]] = tree_flatten(module.parameters())  # type: ignore[assignment]
    return [
        int(w.shape[0] * w.shape[1]) for _, w in leaves if isinstance(w, mx.array) and w.ndim == 2
    ]


def snap_to(segments: list[tuple[int, int]], least: Callable[[int], int], row_least: int) -> Snap:
    """A stop for a slice from `start` over rows split into `segments` (consecutive, covering
    them all): at least `row_least` rows after `start` (or the end), and never cutting a
    segment (a, b) into a piece under `least(b - a)` rows: then the segment's start if the
    slice holds enough rows before it, else the least stop that leaves both pieces enough,
    else the segment's end; and never leaving fewer than `row_least` rows after it."""
    end = segments[-1][1] if segments else 0

    def snap(start: int, wanted: int) -> int:
        wanted = max(wanted, start + row_least)
        for a, b in segments:
            if a < wanted < b:
                need = least(b - a)
                if a - start >= row_least and (wanted - a < need or b - wanted < need):
                    wanted = a  # end before the segment
                else:
                    wanted = max(wanted, max(a, start) + need)
                    wanted = wanted if b - wanted >= need else b
                break
        return end if end - wanted < row_least else wanted

    return snap


def sliced_block(
    block: Any,
    budget: SliceBudget,
    pause: Callable[[], None],
    hidden_states: mx.array,
    cu_seqlens: mx.array,
    rotary_pos_emb: mx.array,
) -> mx.array:
    """`block(hidden_states, cu_seqlens, rotary_pos_emb)`, computed in row slices with
    `pause()` before each; see the module docstring."""
    attn = block.attn
    module = sys.modules[type(attn).__module__]
    rotary = module.apply_rotary_pos_emb_vision
    total, width = hidden_states.shape
    heads = attn.num_heads
    head_dim = width // heads
    bounds: list[int] = [int(b) for b in cu_seqlens.tolist()]  # type: ignore[union-attr, arg-type]
    segments = [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    longest = max((b - a for a, b in segments), default=total)

    # Each row's own products: by the block's weights (q/k/v, the projection, the MLP).
    row_least = least_rows(*weight_widths(block))
    parts: list[tuple[mx.array, mx.array, mx.array]] = []
    qkv_snap = snap_to([(0, total)], lambda _: row_least, row_least)
    for start, stop in budget.slices(("qkv", width, total), total, qkv_snap, pause):
        rows = stop - start
        qkv = attn.qkv(block.norm1(hidden_states[start:stop]))
        qkv = qkv.reshape(rows, 3, heads, -1).transpose(1, 0, 2, 3)
        q, k, v = mx.split(qkv, 3)
        q = rotary(mx.expand_dims(q, 0), rotary_pos_emb[start:stop])[0]
        k = rotary(mx.expand_dims(k, 0), rotary_pos_emb[start:stop])[0]
        mx.eval(q, k, v)
        parts.append((q, k, v))
    # (1, heads, rows, head_dim), contiguous: each slice's attention reads them whole.
    q, k, v = (
        mx.contiguous(mx.concatenate([part[i] for part in parts], axis=1).transpose(0, 2, 1, 3))
        for i in range(3)
    )
    mx.eval(q, k, v)
    del parts

    # Attention, the projection, the MLP: a piece of a segment multiplies its queries by the
    # segment's keys (length x head_dim), then each row by the weights.
    attend = attention_call(module, attn.scale)
    out_snap = snap_to(segments, lambda length: least_rows(length * head_dim), row_least)
    outputs = []
    for start, stop in budget.slices(("out", width, longest), total, out_snap, pause):
        pieces = [
            attend(q[:, :, max(a, start) : min(b, stop)], k[:, :, a:b], v[:, :, a:b])
            for a, b in segments
            if a < stop and b > start
        ]
        out = mx.concatenate(pieces, axis=2).transpose(0, 2, 1, 3).reshape(stop - start, -1)
        x = hidden_states[start:stop] + attn.proj(out)
        x = x + block.mlp(block.norm2(x))
        mx.eval(x)
        outputs.append(x)
    return _joined(outputs)


def sliced_merger(
    merge: Callable[[mx.array], mx.array],
    merged_width: int,
    widths: list[int],
    budget: SliceBudget,
    pause: Callable[[], None],
    hidden_states: mx.array,
) -> mx.array:
    """`merge(hidden_states)` for a merger that maps each group of merged_width / width rows
    to one token on its own (its weights' n x k in `widths`), in slices of whole groups."""
    total, width = hidden_states.shape
    group = max(1, merged_width // width)
    groups = total // group
    if groups * group != total:
        return merge(hidden_states)  # not whole groups: not a merger of this shape
    least = least_rows(*widths)
    snap = snap_to([(0, groups)], lambda _: least, least)
    outputs = []
    for start, stop in budget.slices(("merge", merged_width, groups), groups, snap, pause):
        out = merge(hidden_states[start * group : stop * group])
        mx.eval(out)
        outputs.append(out)
    return _joined(outputs)


def _joined(outputs: list[mx.array]) -> mx.array:
    """The slices' outputs as one array, evaluated in the last slice's unit (left lazy, the
    copy would run in the next unit, unplanned)."""
    out = mx.concatenate(outputs, axis=0)
    mx.eval(out)
    return out


def attention_call(module: Any, scale: float) -> Callable[[mx.array, mx.array, mx.array], mx.array]:
    """The attention call the family's own Attention makes (Qwen3-VL pads the head size to a
    fused kernel's)."""
    fused = getattr(module, "ensure_fused_sdpa", None)
    if fused is not None:
        return lambda q, k, v: fused(q, k, v, scale)
    return lambda q, k, v: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=None)
