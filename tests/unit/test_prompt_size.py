"""Prompts far past the context are refused without tokenizing all of them, and every prompt
that fits gets exactly the ids of one tokenizer call (worker/text/prompt_size.py)."""

from __future__ import annotations

import time
import tracemalloc
from dataclasses import replace

import pytest

from protocol.inputs import CompleteInputs, SamplingParams
from protocol.messages import ErrorCode, TokenizeArgs
from tests.support.inputs import chat
from worker.runtime.errors import RequestError
from worker.text.model import load_text_model
from worker.text.prompt_size import (
    LARGE_TEXT_CHARS,
    PromptBudget,
    count_until,
    longest_token_bytes,
)
from worker.text.prompts import build_chat_prompt, prompt_for
from worker.text.token_counting import COUNT_CONTEXTS, TokenizerCalls
from worker.tiny_models import ensure_checkpoint

WORDS = "lighthouse keeper, the sea at night; waves\n"


@pytest.fixture(scope="module")
def qwen3():  # a 4,096-token context
    return load_text_model(str(ensure_checkpoint("qwen3")))


@pytest.fixture(scope="module")
def qwen3_1m(qwen3):  # as if its context were a million tokens: texts over LARGE_TEXT_CHARS fit
    budget = PromptBudget(10**6, qwen3.prompt_budget.longest_token)
    return replace(qwen3, max_context=10**6, prompt_budget=budget)


class CountingEncode:
    """An encoder that counts the characters it was given."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.chars = tokenizer, 0

    def __call__(self, text: str) -> list[int]:
        self.chars += len(text)
        return self.tokenizer.encode(text, add_special_tokens=False)


def context_error(call) -> RequestError:
    with pytest.raises(RequestError) as caught:
        call()
    assert caught.value.code == ErrorCode.CONTEXT_LENGTH
    return caught.value


def test_the_longest_token_bounds_every_token_of_a_text(qwen3):
    longest = longest_token_bytes(qwen3.tokenizer)
    text = WORDS * 50
    ids = qwen3.tokenizer.encode(text, add_special_tokens=False)
    assert max(len(qwen3.tokenizer.decode([t]).encode()) for t in ids) <= longest


def test_a_text_past_context_times_the_longest_token_is_refused_before_any_encoding(qwen3):
    budget = qwen3.prompt_budget
    encode = CountingEncode(qwen3.tokenizer)
    error = context_error(lambda: budget.encode(encode, "a" * budget.limit * budget.longest_token))
    assert encode.chars == 0
    assert error.prompt_tokens >= budget.limit and error.max_prompt_tokens == budget.limit - 1


def test_a_large_text_past_the_context_is_counted_only_until_it_is_past(qwen3):
    budget = PromptBudget(4096, 10**6)  # no certain overflow: the counting decides
    encode = CountingEncode(qwen3.tokenizer)
    text = WORDS * (2 * LARGE_TEXT_CHARS // len(WORDS))
    error = context_error(lambda: budget.encode(encode, text))
    assert encode.chars < len(text) // 4  # stopped early
    assert error.prompt_tokens >= 4096


def test_counting_in_pieces_never_overstates_a_text_that_fits(qwen3):
    text = WORDS * (LARGE_TEXT_CHARS // len(WORDS))
    whole = len(qwen3.tokenizer.encode(text, add_special_tokens=False))
    assert count_until(CountingEncode(qwen3.tokenizer), text, whole + 1) is None
    reached = count_until(CountingEncode(qwen3.tokenizer), text, whole // 2)
    assert reached is not None and whole // 2 <= reached <= whole


def test_a_large_chat_that_fits_gets_the_ids_of_one_call(qwen3_1m):
    content = WORDS * (LARGE_TEXT_CHARS // len(WORDS) + 10)
    inputs = chat([{"role": "user", "content": content}])
    one_call = qwen3_1m.tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=True
    )
    assert prompt_for(qwen3_1m, inputs) == list(one_call)
    assert build_chat_prompt(qwen3_1m.tokenizer, inputs.messages) == list(one_call)


def test_a_large_completion_that_fits_gets_the_ids_of_one_call(qwen3_1m):
    text = WORDS * (LARGE_TEXT_CHARS // len(WORDS) + 10)
    served = prompt_for(qwen3_1m, CompleteInputs(text, SamplingParams(1)))
    assert served == list(qwen3_1m.tokenizer.encode(text))


@pytest.mark.parametrize("form", ["chat", "completion", "token ids"])
def test_a_12_mb_prompt_is_refused_in_well_under_a_second_with_little_memory(qwen3, form):
    text = "a " * 6_000_000
    inputs = {
        "chat": chat([{"role": "user", "content": text}]),
        "completion": CompleteInputs(text, SamplingParams(1)),
        "token ids": CompleteInputs([5] * 3_000_000, SamplingParams(1)),
    }[form]
    tracemalloc.start()
    started = time.perf_counter()
    context_error(lambda: prompt_for(qwen3, inputs))
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 0.5, elapsed
    assert peak < 64 * 1024 * 1024, peak


def test_tokenize_and_count_never_return_more_than_a_context(qwen3):
    calls = TokenizerCalls(qwen3.tokenizer, qwen3.max_context)
    text = WORDS * 2000  # ~20K tokens: past the 4,096 context, under the certain bound
    context_error(lambda: calls.tokenize(TokenizeArgs(prompt=text)))
    context_error(lambda: calls.tokenize(TokenizeArgs(prompt=text, add_special_tokens=False)))
    assert len(calls.tokenize(TokenizeArgs(prompt=WORDS)).tokens) > 0


def test_a_count_may_pass_the_context_but_stops_far_past_it(qwen3):
    """Anthropic's count_tokens counts a prompt over the context (context management edits
    decide on it), up to COUNT_CONTEXTS contexts."""
    calls = TokenizerCalls(qwen3.tokenizer, qwen3.max_context)
    over = [{"role": "user", "content": WORDS * 1000}]
    assert calls.count_tokens(chat(over)) > qwen3.max_context
    far = [{"role": "user", "content": WORDS * (COUNT_CONTEXTS * 4096 * 2)}]
    context_error(lambda: calls.count_tokens(chat(far)))
