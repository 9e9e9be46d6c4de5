"""TextGeneration: the end rules of mlx_lm.stream_generate, context limit, per-request seeds."""

from __future__ import annotations

from dataclasses import replace

import pytest

from protocol.inputs import CompleteInputs, SamplingParams
from protocol.messages import ErrorCode, FinishReason, Submit
from worker.runtime.errors import RequestError
from worker.text.model import TextGeneration, load_text_model, start_text_generation
from worker.tiny_models import ensure_checkpoint

PROMPT = [5, 6, 7, 8]


@pytest.fixture(scope="module")
def text_model():
    return load_text_model(str(ensure_checkpoint("qwen3")))


def run(generation: TextGeneration) -> tuple[str, list[int], str]:
    text, tokens = "", []
    while True:
        step = generation.advance()
        text += step.text
        tokens += step.token_ids
        if step.finish_reason:
            return text, tokens, step.finish_reason


def test_eos_ends_with_stop_counts_as_a_token_and_adds_no_text(text_model):
    eos = text_model.tokenizer.eos_token_id
    sampling = SamplingParams(max_tokens=5, temperature=0.0, logit_bias={eos: 100.0})
    generation = TextGeneration(text_model, PROMPT, sampling)
    assert run(generation) == ("", [eos], FinishReason.STOP)
    assert (generation.prompt_tokens, generation.completion_tokens) == (4, 1)


def test_max_tokens_ends_with_length(text_model):
    generation = TextGeneration(text_model, PROMPT, SamplingParams(max_tokens=3, temperature=0.0))
    _, tokens, finish = run(generation)
    assert (len(tokens), finish, generation.completion_tokens) == (3, FinishReason.LENGTH, 3)


def test_reaching_the_context_window_ends_with_length(text_model):
    small = replace(text_model, max_context=len(PROMPT) + 2)
    generation = TextGeneration(small, PROMPT, SamplingParams(max_tokens=50, temperature=0.0))
    _, tokens, finish = run(generation)
    assert (len(tokens), finish) == (2, FinishReason.LENGTH)


@pytest.mark.parametrize("max_tokens", [0, -1, 2.5])
def test_max_tokens_below_one_or_not_an_integer_is_a_bad_request(text_model, max_tokens):
    with pytest.raises(RequestError) as caught:
        TextGeneration(text_model, PROMPT, SamplingParams(max_tokens=max_tokens))
    assert caught.value.code == ErrorCode.BAD_REQUEST
    assert "max_tokens" in caught.value.message


def test_seeded_requests_are_reproducible_while_interleaved_with_others(text_model):
    def seeded() -> TextGeneration:
        return TextGeneration(
            text_model, PROMPT, SamplingParams(max_tokens=12, temperature=1.0, top_k=0, seed=42)
        )

    solo = run(seeded())
    a, noise = (
        seeded(),
        TextGeneration(text_model, PROMPT, SamplingParams(max_tokens=12, temperature=1.0)),
    )
    tokens = []
    for _ in range(12):
        noise.advance()
        tokens += a.advance().token_ids
    assert tokens == solo[1]


def test_start_validates_and_tokenizes_a_submit(text_model):
    submit = Submit("r", CompleteInputs(PROMPT, SamplingParams(max_tokens=2)), False)
    generation = start_text_generation(text_model, submit)
    assert generation.prompt_tokens == len(PROMPT)
    generation.close()
