"""A language model's attention on two CPU streams (worker/text/laned_attention.py): mlx-lm's
output bit for bit, for grouped, multi-head and one-KV-head attention, causal, array and no
masks, a prefill chunk after earlier context and a decode step; small calls stay whole; and
`install` makes a model's own forward pass use it, with the same logits."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.models.base import scaled_dot_product_attention as stock

from worker.runtime import side_stream
from worker.text import laned_attention
from worker.text.laned_attention import MIN_SCORES, attention
from worker.tiny_models import ensure_checkpoint

pytestmark = pytest.mark.skipif(mx.default_device() != mx.cpu, reason="split on the CPU only")


@pytest.fixture
def side_calls(monkeypatch) -> list[int]:
    """How many times `attention` used the side stream."""
    calls: list[int] = []
    real = side_stream.side_stream

    def counted():
        calls.append(1)
        return real()

    monkeypatch.setattr(side_stream, "side_stream", counted)
    return calls


def qkv(rows: int, heads: int, kv_heads: int, length: int, keys: int, seed: int = 0):
    mx.random.seed(seed)
    q = mx.random.normal((rows, heads, length, 32))
    k = mx.random.normal((rows, kv_heads, keys, 32))
    v = mx.random.normal((rows, kv_heads, keys, 32))
    mx.eval(q, k, v)
    return q, k, v


@pytest.mark.parametrize(("heads", "kv_heads"), [(14, 2), (4, 4), (4, 1), (6, 3), (7, 1)])
@pytest.mark.parametrize("mask", ["causal", None, "additive", "boolean"])
def test_a_split_call_equals_mlx_lm_bit_for_bit(side_calls, heads, kv_heads, mask):
    """(7, 1): Qwen2.5-0.5B's 14 / 2 heads on one of two tensor-parallel ranks. The boolean
    mask has the batch engine's (rows, 1, queries, keys) shape."""
    q, k, v = qkv(2, heads, kv_heads, 256, 640)  # a chunk of 256 after 384 tokens of context
    if mask == "additive":
        mask = mx.random.normal((256, 640)) - 2.0
    elif mask == "boolean":
        mask = mx.random.uniform(shape=(2, 1, 256, 640)) > 0.3
    want = stock(q, k, v, None, scale=0.17, mask=mask)
    got = attention(q, k, v, None, scale=0.17, mask=mask)
    assert side_calls and got.shape == want.shape and mx.array_equal(got, want).item()


@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16])
def test_half_precision_equals_mlx_lm_bit_for_bit(side_calls, dtype):
    q, k, v = (t.astype(dtype) for t in qkv(1, 14, 2, 256, 640))
    want = stock(q, k, v, None, scale=0.17, mask="causal")
    got = attention(q, k, v, None, scale=0.17, mask="causal")
    assert side_calls and got.dtype == dtype and mx.array_equal(got, want).item()


def test_sinks_a_mask_per_head_and_a_quantized_cache_stay_whole(side_calls):
    q, k, v = qkv(1, 4, 2, 256, 640)
    sinks = mx.random.normal((4,))
    want = stock(q, k, v, None, scale=0.17, mask="causal", sinks=sinks)
    assert mx.array_equal(attention(q, k, v, None, scale=0.17, mask="causal", sinks=sinks), want)
    per_head = mx.random.normal((1, 4, 256, 640))
    want = stock(q, k, v, None, scale=0.17, mask=per_head)
    assert mx.array_equal(attention(q, k, v, None, scale=0.17, mask=per_head), want).item()
    assert laned_attention._split(q, k, None, mx.random.normal((4, 256, 640)), None) is None

    class Quantized:  # what mlx-lm's function looks for: a cache with `bits`
        bits, group_size = 4, 64

    assert laned_attention._split(q, k, Quantized(), "causal", None) is None
    assert not side_calls


def test_a_decode_step_over_a_long_context_is_split_and_equal(side_calls):
    q, k, v = qkv(4, 14, 2, 1, 4096)
    assert 4 * 14 * 4096 >= MIN_SCORES
    want = stock(q, k, v, None, scale=0.125, mask=None)
    assert mx.array_equal(attention(q, k, v, None, scale=0.125, mask=None), want).item()
    assert side_calls


def test_a_small_call_stays_whole(side_calls):
    q, k, v = qkv(1, 4, 2, 1, 100)
    want = stock(q, k, v, None, scale=0.125, mask=None)
    assert mx.array_equal(attention(q, k, v, None, scale=0.125, mask=None), want).item()
    assert not side_calls


def test_an_installed_model_gives_the_same_logits(side_calls, monkeypatch):
    from mlx_lm import load
    from mlx_lm.models import qwen3

    model, _ = load(str(ensure_checkpoint("qwen3")))
    tokens = mx.array([[(7 * i) % 200 + 3 for i in range(600)]])  # long enough to split
    # mlx-lm's own function (an earlier load in this process may have installed ours).
    monkeypatch.setattr(qwen3, "scaled_dot_product_attention", stock)
    want = model(tokens)
    mx.eval(want)
    assert not side_calls
    assert laned_attention.install(model)
    assert qwen3.scaled_dot_product_attention is attention
    got = model(tokens)
    assert side_calls and mx.array_equal(got, want).item()
