"""Rewinding a speculating batch's KV cache past rejected tokens leaves what feeding only the
kept ones leaves (worker/text/speculation/kv_rewind.py, ragged_cache.py), on the tiny qwen3."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.models.cache import BatchKVCache, KVCache, RotatingKVCache, make_prompt_cache

from worker.text.model import load_text_model
from worker.text.speculation.kv_rewind import ragged, rewind, rewindable, trimmed
from worker.tiny_models import ensure_checkpoint

ATOL = 2e-4  # float32 matmuls of different shapes may round differently


@pytest.fixture(scope="module")
def model():
    return load_text_model(str(ensure_checkpoint("qwen3"))).model


def batch_of(model, prompts):
    """Rows prefilled on their own, merged as mlx-lm's prompt batch holds them (left-padded)."""
    caches = []
    for prompt in prompts:
        cache = make_prompt_cache(model)
        model(mx.array([prompt]), cache=cache)
        caches.append(cache)
    return [BatchKVCache.merge([c[i] for c in caches]) for i in range(len(model.layers))]


def alone(model, tokens):
    cache = make_prompt_cache(model)
    model(mx.array([tokens]), cache=cache)
    return cache


def test_rows_rewound_by_different_amounts_read_back_as_if_only_the_kept_tokens_were_fed(model):
    prompts = [list(range(5, 17)), list(range(40, 45)), list(range(60, 69))]
    kept = [list(p) for p in prompts]
    spec = ragged(batch_of(model, prompts))
    # Two verifications, each rejecting a different number of positions per row.
    for fed, rejected in (
        ([[7, 8, 9, 10], [11, 12, 13, 14], [15, 16, 17, 18]], [1, 3, 0]),
        ([[21, 22, 23], [24, 25, 26], [27, 28, 29]], [2, 0, 1]),
    ):
        model(mx.array(fed), cache=spec)
        rewind(spec, rejected)
        for row, tokens, r in zip(kept, fed, rejected, strict=True):
            row += tokens[: len(tokens) - r]
    next_tokens = [[3], [4], [5]]
    got = model(mx.array(next_tokens), cache=spec)
    for i, tokens in enumerate(kept):
        reference = alone(model, tokens)
        want = model(mx.array([next_tokens[i]]), cache=reference)
        assert mx.allclose(got[i], want[0], atol=ATOL).item()
        row = spec[0].extract(i)
        assert row.offset == reference[0].offset == len(tokens) + 1
        keys = reference[0].keys[..., : row.offset, :]
        assert mx.allclose(row.keys, keys, atol=ATOL).item()


def test_rows_joining_and_leaving_a_ragged_batch_keep_their_contents(model):
    spec = ragged(batch_of(model, [list(range(5, 17))]))
    model(mx.array([[7, 8, 9]]), cache=spec)
    rewind(spec, [2])
    joining = ragged(batch_of(model, [list(range(40, 45)), list(range(60, 90))]))
    for layer, other in zip(spec, joining, strict=True):
        layer.extend(other)
        layer.filter([0, 2])  # the middle row leaves
    got = model(mx.array([[3], [4]]), cache=spec)
    for i, tokens in enumerate([list(range(5, 17)) + [7], list(range(60, 90))]):
        want = model(mx.array([[3 + i]]), cache=alone(model, tokens))
        assert mx.allclose(got[i], want[0], atol=ATOL).item()


def test_rewinding_nothing_changes_nothing():
    layer = ragged([BatchKVCache([0, 0])])[0]
    layer.update_and_fetch(mx.zeros((2, 2, 4, 8)), mx.zeros((2, 2, 4, 8)))
    rewind([layer], [0, 0])
    assert layer.lengths == [4, 4]
    rewind([layer], [1, 3])
    assert layer.lengths == [3, 1] and layer.offset.tolist() == [3, 1]


def test_an_extracted_cache_is_cut_in_place():
    layer = KVCache()
    layer.update_and_fetch(mx.zeros((1, 2, 6, 4)), mx.zeros((1, 2, 6, 4)))
    assert trimmed([layer], 2)[0].offset == 4
    assert trimmed([layer], 0)[0].offset == 4


def test_caches_that_cannot_drop_positions_are_named():
    assert rewindable([KVCache(), BatchKVCache([0])]) is None
    problem = rewindable([KVCache(), RotatingKVCache(max_size=8)])
    assert problem is not None and "RotatingKVCache" in problem
