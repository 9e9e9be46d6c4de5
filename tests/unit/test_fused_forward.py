"""The fused forward pass (worker/text/fused_forward.py) computes what two model calls compute.

Decode rows of different lengths (a left-padded BatchKVCache, as mlx-lm's generation batch
holds them) and a prefill chunk onto a cached prefix (the prompt batch's cache), on the tiny
checkpoints of every family it supports: the decode logits and both caches equal those of
`model(decode)` then `model(chunk)`, and the step after reads the caches the same way.
"""

from __future__ import annotations

import copy

import mlx.core as mx
import pytest
from mlx_lm.models import gemma3_text
from mlx_lm.models.cache import make_prompt_cache

from worker.text.fused_forward import fusable, fused_logits
from worker.text.model import load_text_model
from worker.tiny_models import ensure_checkpoint

ATOL = 2e-4  # float32 matmuls of different shapes may round differently


@pytest.fixture(scope="module", params=["qwen3", "qwen2", "llama"])
def model(request):
    return load_text_model(str(ensure_checkpoint(request.param))).model


def batch_cache(model, prompts: list[list[int]]) -> list:
    """The merged (left-padded) batch cache of `prompts`, each prefilled on its own."""
    caches = []
    for prompt in prompts:
        cache = make_prompt_cache(model)
        model(mx.array([prompt]), cache=cache)
        caches.append(cache)
    merged = [
        layer[0].merge([c[i] for c in caches]) for i, layer in enumerate(zip(*caches, strict=True))
    ]
    mx.eval([c.state for c in merged])
    return merged


def states(cache: list) -> list:
    out = []
    for layer in cache:
        keys, values = layer.state[:2]
        out += [keys, values]
    return out


def assert_close(got: list, want: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        assert mx.allclose(g, w, atol=ATOL).item()


def test_the_fused_pass_equals_a_decode_call_then_a_chunk_call(model):
    assert fusable(model)
    decode = batch_cache(model, [list(range(5, 17)), list(range(40, 45))])
    chunk = batch_cache(model, [list(range(60, 80))])
    ref_decode, ref_chunk = copy.deepcopy(decode), copy.deepcopy(chunk)
    step = mx.array([[7], [9]])
    tokens = mx.array([list(range(100, 124))])

    want = model(step, cache=ref_decode)
    model(tokens, cache=ref_chunk)
    got = fused_logits(model, step, decode, tokens, chunk)
    mx.eval(got, [c.state for c in chunk])

    assert_close([got], [want])
    assert (mx.argmax(got, axis=-1) == mx.argmax(want, axis=-1)).all().item()
    assert_close(states(decode), states(ref_decode))
    assert_close(states(chunk), states(ref_chunk))
    # The caches read back the same way: one more plain step on each.
    assert_close([model(step, cache=decode)], [model(step, cache=ref_decode)])
    assert_close([model(tokens[:, :3], cache=chunk)], [model(tokens[:, :3], cache=ref_chunk)])


def test_several_chunk_rows_of_one_width_are_fed_together(model):
    decode = batch_cache(model, [list(range(5, 9))])
    chunk = batch_cache(model, [list(range(60, 70)), list(range(20, 24))])
    ref_decode, ref_chunk = copy.deepcopy(decode), copy.deepcopy(chunk)
    step = mx.array([[3]])
    tokens = mx.array([list(range(100, 106)), list(range(200, 206))])

    want = model(step, cache=ref_decode)
    model(tokens, cache=ref_chunk)
    got = fused_logits(model, step, decode, tokens, chunk)
    mx.eval(got, [c.state for c in chunk])

    assert_close([got], [want])
    assert_close(states(chunk), states(ref_chunk))


def test_decode_rows_of_several_tokens_verify_in_the_fused_pass(model):
    """Speculation verifies a token and its proposals per row: decode rows of width 3."""
    decode = batch_cache(model, [list(range(5, 17)), list(range(40, 45))])
    chunk = batch_cache(model, [list(range(60, 70))])
    ref_decode, ref_chunk = copy.deepcopy(decode), copy.deepcopy(chunk)
    step = mx.array([[7, 8, 9], [9, 3, 4]])
    tokens = mx.array([list(range(100, 105))])

    want = model(step, cache=ref_decode)
    model(tokens, cache=ref_chunk)
    got = fused_logits(model, step, decode, tokens, chunk)
    mx.eval(got, [c.state for c in chunk])

    assert got.shape == want.shape == (2, 3, want.shape[-1])
    assert_close([got], [want])
    assert_close(states(decode), states(ref_decode))
    assert_close(states(chunk), states(ref_chunk))


def test_families_it_does_not_know_are_not_fused(model):
    args = gemma3_text.ModelArgs(
        model_type="gemma3_text", hidden_size=16, num_hidden_layers=2, intermediate_size=32,
        num_attention_heads=2, head_dim=8, vocab_size=64,
    )  # fmt: skip
    assert not fusable(gemma3_text.Model(args))  # its block has four norms
    assert not fusable(object())
    layer = model.model.layers[0]
    layer.use_sliding = True  # a sliding-window layer masks differently
    try:
        assert not fusable(model)
    finally:
        del layer.use_sliding
    assert fusable(model)
