"""Per-request sampling: greedy equals mlx-lm, seeded draws are reproducible, filters, defaults."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.generate import generate_step
from mlx_lm.sample_utils import make_sampler

from protocol.inputs import SamplingParams
from protocol.messages import ErrorCode
from worker.runtime.errors import RequestError
from worker.text.model import load_text_model
from worker.text.prompts import build_completion_prompt
from worker.text.sampling import (
    load_sampling_defaults,
    make_request_logits_processors,
    make_request_sampler,
    resolve_sampling,
)
from worker.tiny_models import ensure_checkpoint

VOCAB = 4096


@pytest.fixture(scope="module")
def text_model():
    return load_text_model(str(ensure_checkpoint("qwen3")))


def resolved(**fields):
    return resolve_sampling(SamplingParams(max_tokens=8, **fields), {}, VOCAB)


def draw(sampler, logprobs: mx.array, n: int, disturb_global_rng: bool = False) -> list[int]:
    tokens = []
    for _ in range(n):
        tokens.append(sampler(logprobs).item())
        if disturb_global_rng:
            mx.random.uniform(shape=(3,))  # what another request's sampling would do
    return tokens


@pytest.fixture
def flat_logprobs() -> mx.array:
    # Near-uniform logits: many tokens are likely, so different keys give different draws.
    logits = mx.random.normal((1, VOCAB), key=mx.random.key(1)) * 0.1
    return logits - mx.logsumexp(logits, keepdims=True)


def generate(text_model, sampler, logits_processors=None, n: int = 12) -> list[int]:
    prompt = mx.array(build_completion_prompt(text_model.tokenizer, "def main():\n    return"))
    steps = generate_step(
        prompt,
        text_model.model,
        max_tokens=n,
        sampler=sampler,
        logits_processors=logits_processors,
    )
    return [token for token, _ in steps]


def test_greedy_generation_equals_mlx_lm_greedy(text_model):
    ours = make_request_sampler(resolved(temperature=0.0), VOCAB)
    assert generate(text_model, ours) == generate(text_model, make_sampler(0.0))


def test_same_seed_gives_the_same_tokens_even_when_global_rng_is_used_in_between(flat_logprobs):
    first = draw(make_request_sampler(resolved(temperature=1.0, seed=7), VOCAB), flat_logprobs, 20)
    again = make_request_sampler(resolved(temperature=1.0, seed=7), VOCAB)
    assert draw(again, flat_logprobs, 20, disturb_global_rng=True) == first


def test_different_seeds_give_different_tokens(flat_logprobs):
    a = draw(make_request_sampler(resolved(temperature=1.0, seed=1), VOCAB), flat_logprobs, 20)
    b = draw(make_request_sampler(resolved(temperature=1.0, seed=2), VOCAB), flat_logprobs, 20)
    assert a != b


def test_the_key_advances_per_token(flat_logprobs):
    tokens = draw(make_request_sampler(resolved(temperature=1.0, seed=3), VOCAB), flat_logprobs, 20)
    assert len(set(tokens)) > 1


def test_top_k_1_equals_greedy(text_model):
    top1 = make_request_sampler(resolved(temperature=1.0, top_k=1, seed=5), VOCAB)
    assert generate(text_model, top1) == generate(text_model, make_sampler(0.0))


def test_top_k_at_or_above_the_vocabulary_keeps_every_token(flat_logprobs):
    sampler = make_request_sampler(resolved(temperature=1.0, top_k=VOCAB, seed=9), VOCAB)
    unfiltered = make_request_sampler(resolved(temperature=1.0, seed=9), VOCAB)
    assert draw(sampler, flat_logprobs, 10) == draw(unfiltered, flat_logprobs, 10)


def test_logit_bias_can_force_a_token(text_model):
    sampling = resolved(temperature=1.0, seed=0, logit_bias={1234: 100.0})
    tokens = generate(
        text_model,
        make_request_sampler(sampling, VOCAB),
        make_request_logits_processors(sampling),
    )
    assert tokens == [1234] * len(tokens)


def test_logit_bias_out_of_the_vocabulary_is_a_bad_request():
    with pytest.raises(RequestError) as caught:
        resolved(logit_bias={VOCAB: 5.0})
    assert caught.value.code == ErrorCode.BAD_REQUEST
    assert str(VOCAB) in caught.value.message


@pytest.mark.parametrize(
    "fields, named",
    [
        ({"temperature": -0.5}, "temperature"),
        ({"top_p": 1.5}, "top_p"),
        ({"min_p": -0.1}, "min_p"),
        ({"top_k": -3}, "top_k"),
        ({"repetition_penalty": 0.0}, "repetition_penalty"),
        ({"seed": "abc"}, "seed"),
    ],
)
def test_invalid_sampling_values_are_bad_requests_naming_the_field(fields, named):
    with pytest.raises(RequestError) as caught:
        resolved(**fields)
    assert caught.value.code == ErrorCode.BAD_REQUEST
    assert named in caught.value.message


def test_none_takes_the_checkpoint_default():
    defaults = {"temperature": 0.6, "top_p": 0.95, "top_k": 20}
    sampling = resolve_sampling(SamplingParams(max_tokens=4), defaults, VOCAB)
    assert (sampling.temperature, sampling.top_p, sampling.top_k) == (0.6, 0.95, 20)


def test_none_without_a_checkpoint_default_takes_openai_defaults():
    sampling = resolve_sampling(SamplingParams(max_tokens=4), {}, VOCAB)
    assert (sampling.temperature, sampling.top_p, sampling.top_k, sampling.min_p) == (
        1.0,
        1.0,
        0,
        0.0,
    )


def test_an_explicit_value_overrides_the_checkpoint_default():
    sampling = resolve_sampling(
        SamplingParams(max_tokens=4, temperature=0.0), {"temperature": 0.6}, VOCAB
    )
    assert sampling.temperature == 0.0


def test_checkpoint_defaults_are_read_from_generation_config():
    defaults = load_sampling_defaults(ensure_checkpoint("qwen3"))
    assert defaults["temperature"] == 0.6
    assert "max_new_tokens" not in defaults


def test_a_missing_generation_config_means_no_defaults(tmp_path):
    assert load_sampling_defaults(tmp_path) == {}
