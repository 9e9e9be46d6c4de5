"""Qwen-VL vision blocks with their elementwise work on two CPU streams (worker/vision/lanes.py):
the same bits as mlx-vlm's own call, for each family; and a paced tower's whole blocks use it."""

from __future__ import annotations

import mlx.core as mx
import pytest

from tests.unit.test_vision_slicing import FAMILIES, GRID, NARROW, ODD_GRID, features, pixels, tower
from worker.vision import paced
from worker.vision.lanes import laned, laned_block
from worker.vision.paced import StepRun

pytestmark = pytest.mark.skipif(mx.default_device() != mx.cpu, reason="lanes run on the CPU")


def block_inputs(
    model, grid: list[list[int]], dtype=mx.float32
) -> list[tuple[mx.array, mx.array, mx.array]]:
    """What each of the tower's blocks is called with on these pictures (mlx-vlm's own call
    recorded): (hidden_states, cu_seqlens, rotary_pos_emb), Qwen2.5-VL's windows included."""
    seen: list[tuple[mx.array, mx.array, mx.array]] = []
    for block in model.blocks:
        cls = type(block)

        class Recording(cls):  # type: ignore[misc, valid-type]
            def __call__(self, hidden_states, cu_seqlens, rotary_pos_emb):
                seen.append((hidden_states, cu_seqlens, rotary_pos_emb))
                return super().__call__(hidden_states, cu_seqlens, rotary_pos_emb)

        block.__class__ = Recording
    try:
        patches, grid_thw = pixels(grid)
        mx.eval(features(model(patches.astype(dtype), grid_thw)))
    finally:
        for block in model.blocks:
            block.__class__ = block.__class__.__mro__[1]
    return seen


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    ("width", "heads", "grid", "dtype"),
    [
        (256, 4, GRID, mx.float32),
        (NARROW, 4, ODD_GRID, mx.float32),
        (192, 3, GRID, mx.float32),  # odd heads: one and two
        (256, 4, GRID, mx.bfloat16),  # as real towers are stored
    ],
)
def test_a_laned_block_equals_mlx_vlm_bit_for_bit(family, width, heads, grid, dtype):
    model = tower(family, width, heads)
    model.set_dtype(dtype)
    calls = block_inputs(model, grid, dtype)
    assert len(calls) == len(model.blocks)
    for block, inputs in zip(model.blocks, calls, strict=True):
        assert laned(block)
        stock = block(*inputs)
        out = laned_block(block, *inputs)
        assert out.dtype == stock.dtype and out.shape == stock.shape
        assert mx.array_equal(out, stock).item()


def test_a_paced_tower_runs_its_whole_blocks_laned(monkeypatch):
    model = tower("qwen2_vl")
    inputs = pixels(GRID)
    stock = features(model(*inputs))
    calls = []

    def counted(block, *args):
        calls.append(block)
        return laned_block(block, *args)

    monkeypatch.setattr(paced, "laned_block", counted)

    class Holder:
        vision_tower = model

    paced.pace(Holder())
    run = StepRun(lambda: iter([model(*inputs)]))
    while not isinstance(step := run.advance(), tuple):
        pass
    out = features(step[0])
    assert calls == list(model.blocks)
    assert all(mx.array_equal(a, b).item() for a, b in zip(out, stock, strict=True))
