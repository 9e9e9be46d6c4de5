"""Qwen-VL vision towers in row slices (worker/vision/slicing.py): the same bits as mlx-vlm's
own call, for each family, with the bundled BLAS and (in a child process) with OpenBLAS, whose
small-matrix kernels are what the slicing's least sizes keep away from."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import mlx.core as mx
import pytest

from worker.vision.paced import StepRun, pace
from worker.vision.slicing import SliceBudget, snap_to

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
DEPTH = 2
# Two pictures: 32 x 32 and 16 x 16 patches (448 and 224 px), so attention has two segments.
GRID = [[1, 32, 32], [1, 16, 16]]
# A narrow tower (the tiny checkpoints' width) and a picture of 20 x 20 patches, which
# Qwen2.5-VL's 8 x 8-patch windows do not divide (windows of 64, 32 and 16 rows): slices of
# small windows alone would be products small enough for OpenBLAS's other kernels.
NARROW, ODD_GRID = 64, [[1, 20, 20]]
# What a slice may take: no limit (whole blocks), nothing (every slice the least it may be: what
# the engine gives before it timed a decode step), and a few milliseconds (steered sizes).
BUDGETS = (None, 0.0, 0.02)

pytestmark = pytest.mark.skipif(mx.default_device() != mx.cpu, reason="slices run on the CPU")


def tower(family: str, width: int = 256, heads: int = 4):
    """A random-weight vision tower of `family` (`width`, `heads`, two blocks)."""
    config_module = importlib.import_module(f"mlx_vlm.models.{family}.config")
    vision = importlib.import_module(f"mlx_vlm.models.{family}.vision")
    fields = {"model_type": family, "depth": DEPTH, "num_heads": heads, "in_channels": 3}
    if family == "qwen2_vl":
        fields |= {"embed_dim": width, "hidden_size": width, "mlp_ratio": 2.0}
    else:
        fields |= {"hidden_size": width, "intermediate_size": 2 * width, "out_hidden_size": width}
        fields |= {"window_size": 112, "fullatt_block_indexes": [1]}
    if family == "qwen3_vl":
        fields |= {"num_position_embeddings": 1024, "deepstack_visual_indexes": [0]}
    mx.random.seed(0)
    model = vision.VisionModel(config_module.VisionConfig.from_dict(fields))
    mx.eval(model.parameters())
    return model


def pixels(grid: list[list[int]]) -> tuple[mx.array, mx.array]:
    patches = sum(t * h * w for t, h, w in grid)
    mx.random.seed(1)
    return mx.random.normal((patches, 3 * 2 * 14 * 14)), mx.array(grid)


def features(output) -> list[mx.array]:
    """A tower's output as arrays (Qwen3-VL's: the merged features and the deepstack ones)."""
    if isinstance(output, tuple):
        first, rest = output
        return [first, *rest]
    return [output]


def sliced_run(model, inputs, seconds: float | None) -> tuple[list[mx.array], int]:
    """The tower's output computed in a StepRun whose slices may take `seconds`, and the
    units it was cut into."""
    run = StepRun(lambda: iter([model(*inputs)]))
    run.budget.seconds = seconds
    while True:
        step = run.advance()
        if isinstance(step, tuple):
            out = features(step[0])
            mx.eval(out)
            return out, run.pauses


def check(family: str, width: int = 256, grid: list[list[int]] = GRID) -> dict[str, dict]:
    """For each budget: whether the sliced output equals mlx-vlm's call, bit for bit, the
    units it took, and the tower's blocks and mergers."""
    model = tower(family, width)
    inputs = pixels(grid)
    stock = features(model(*inputs))
    mx.eval(stock)
    pace_tower(model)
    modules = DEPTH + 1 + len(getattr(model, "deepstack_merger_list", []))
    results: dict[str, dict[str, object]] = {}
    for seconds in BUDGETS:
        out, units = sliced_run(model, inputs, seconds)
        equal = len(out) == len(stock) and all(
            a.shape == b.shape and bool(mx.array_equal(a, b))
            for a, b in zip(out, stock, strict=True)
        )
        results[str(seconds)] = {"equal": equal, "units": units, "modules": modules}
    return results


def pace_tower(model) -> None:
    """`pace` on a model that is only this tower."""

    class Holder:
        vision_tower = model

    pace(Holder())


def assert_sliced_equal(results: dict[str, dict[str, object]]) -> None:
    assert all(r["equal"] for r in results.values()), results
    # Without a budget, one unit a block and one a merger; with the least, many.
    assert results["None"]["units"] == results["None"]["modules"]
    assert results["0.0"]["units"] > 10 * DEPTH  # type: ignore[operator]


def assert_equal(results: dict[str, dict[str, object]]) -> None:
    assert all(r["equal"] for r in results.values()), results


@pytest.mark.parametrize("family", FAMILIES)
def test_a_sliced_tower_equals_mlx_vlm_bit_for_bit(family):
    assert_sliced_equal(check(family))


@pytest.mark.parametrize("family", FAMILIES)
def test_a_narrow_tower_over_uneven_windows_equals_mlx_vlm_bit_for_bit(family):
    assert_equal(check(family, NARROW, ODD_GRID))


def test_with_openblas_too():
    from protocol.launch.blas import find_openblas

    library = find_openblas()
    if library is None:
        pytest.skip("no OpenBLAS installed")
    code = (
        "import json\n"
        "from tests.unit.test_vision_slicing import FAMILIES, NARROW, ODD_GRID, check\n"
        "print(json.dumps({f: [check(f), check(f, NARROW, ODD_GRID)] for f in FAMILIES}))\n"
    )
    env = {**os.environ, "LD_PRELOAD": str(library), "OPENBLAS_THREAD_TIMEOUT": "4"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=600, check=True,
    )  # fmt: skip
    for wide, narrow in json.loads(done.stdout.strip().splitlines()[-1]).values():
        assert_sliced_equal(wide)
        assert_equal(narrow)


def test_a_slice_never_leaves_a_piece_of_a_segment_under_its_least_rows():
    segments = [(0, 100), (100, 164), (164, 400)]
    snap = snap_to(segments, lambda length: 40, 1)
    assert snap(0, 50) == 50  # 50 and 50 rows: both pieces are enough
    assert snap(0, 70) == 100  # 70 would leave 30: the segment's end
    assert snap(0, 10) == 40  # too few: the least that leaves enough after
    assert snap(50, 120) == 100  # would cut the 64-row window into 20 and 44: ends before it
    assert snap(100, 120) == 164  # a window too small to cut into two pieces of 40
    assert snap(164, 200) == 204  # 36 rows: raised to 40
    assert snap(300, 380) == 400  # 20 left after: to the end


def test_a_slice_of_whole_small_segments_still_has_its_least_rows():
    segments = [(0, 10), (10, 20), (20, 100)]
    snap = snap_to(segments, lambda length: 5, 30)
    assert snap(0, 5) == 30  # two small windows are 20 rows: on into the third
    assert snap(0, 75) == 100  # 25 rows would be left: to the end
    assert snap(30, 40) == 60  # 30 rows at least
    assert snap(80, 90) == 100


def test_a_budget_steers_the_rows_toward_its_time_and_grows_at_most_twice():
    budget = SliceBudget()
    budget.seconds = 1.0
    ranges = list(budget.slices(("pass",), 200, lambda start, stop: stop, lambda: None))
    # The loop body takes no time: each slice doubles the last (32, 64, then the rest).
    assert ranges == [(0, 32), (32, 96), (96, 200)]
    budget.seconds = None
    assert list(budget.slices(("pass",), 200, lambda start, stop: stop, lambda: None)) == [(0, 200)]
