"""Prompt building and Submit input validation in the text engine."""

from __future__ import annotations

import pytest

from protocol.inputs import SpeechInputs
from protocol.messages import ErrorCode
from tests.support.inputs import complete, inputs_of
from worker.runtime.errors import RequestError
from worker.text.model import load_text_model
from worker.text.prompts import build_chat_prompt, build_completion_prompt, prompt_for
from worker.tiny_models import ensure_checkpoint

MESSAGES = [{"role": "user", "content": "Hello there"}]


@pytest.fixture(scope="module")
def qwen3():
    return load_text_model(str(ensure_checkpoint("qwen3")))


@pytest.fixture(scope="module")
def llama():
    return load_text_model(str(ensure_checkpoint("llama")))


def bad_request_message(text_model, op, inputs) -> str:
    with pytest.raises(RequestError) as caught:
        prompt_for(text_model, inputs_of(op, inputs) if isinstance(inputs, dict) else inputs)
    assert caught.value.code == ErrorCode.BAD_REQUEST
    return caught.value.message


def test_chat_prompt_is_what_mlx_lm_apply_chat_template_gives(qwen3):
    expected = qwen3.tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True)
    assert build_chat_prompt(qwen3.tokenizer, MESSAGES) == list(expected)


def test_chat_prompt_ends_with_the_generation_prompt(qwen3):
    text = qwen3.tokenizer.decode(build_chat_prompt(qwen3.tokenizer, MESSAGES))
    assert text.endswith("<|im_start|>assistant\n")


def test_chat_template_kwargs_reach_the_template(qwen3):
    plain = build_chat_prompt(qwen3.tokenizer, MESSAGES)
    no_think = build_chat_prompt(qwen3.tokenizer, MESSAGES, {"enable_thinking": False})
    assert no_think != plain
    assert "</think>" in qwen3.tokenizer.decode(no_think)


def test_chat_prompt_of_a_raw_transformers_tokenizer_is_a_list_of_ids(qwen3):
    # transformers 5 returns a BatchEncoding by default; the builder must still give ids.
    raw = qwen3.tokenizer._tokenizer
    assert build_chat_prompt(raw, MESSAGES) == build_chat_prompt(qwen3.tokenizer, MESSAGES, {})


def test_completion_string_gets_the_bos_token_like_stream_generate(llama):
    tokens = build_completion_prompt(llama.tokenizer, "hello world")
    assert tokens[0] == llama.tokenizer.bos_token_id
    assert tokens[1:] == llama.tokenizer.encode("hello world", add_special_tokens=False)


def test_completion_string_starting_with_bos_gets_no_second_bos(llama):
    bos = llama.tokenizer.bos_token
    tokens = build_completion_prompt(llama.tokenizer, bos + "hello world")
    assert tokens.count(llama.tokenizer.bos_token_id) == 1


def test_completion_token_ids_are_used_as_given(qwen3):
    assert prompt_for(qwen3, complete([5, 6, 7])) == [5, 6, 7]


def test_completion_token_id_out_of_range_is_a_bad_request(qwen3):
    message = bad_request_message(qwen3, "complete", {"prompt": [5, qwen3.vocab_size]})
    assert "prompt[1]" in message and "out of range" in message


def test_a_prompt_as_long_as_the_context_is_context_length_exceeded_naming_both(qwen3):
    n = qwen3.max_context
    with pytest.raises(RequestError) as caught:
        prompt_for(qwen3, inputs_of("complete", {"prompt": [5] * n}))
    error = caught.value.info()
    assert error.code == ErrorCode.CONTEXT_LENGTH
    assert error.message == f"prompt is too long: {n} tokens > {n - 1} maximum"
    assert (error.prompt_tokens, error.max_prompt_tokens) == (n, n - 1)
    prompt_for(qwen3, inputs_of("complete", {"prompt": [5] * (n - 1)}))  # one token of room


def test_an_empty_prompt_is_a_bad_request(qwen3):
    assert "empty" in bad_request_message(qwen3, "complete", {"prompt": []})


@pytest.mark.parametrize(
    "inputs, named",
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"content": "hi"}]}, "role"),
        ({"messages": [{"role": "user", "content": 3}]}, "content"),
        ({"messages": MESSAGES, "chat_template_kwargs": {"tokenize": False}}, "tokenize"),
    ],
)
def test_malformed_chat_inputs_are_bad_requests_naming_the_problem(qwen3, inputs, named):
    assert named in bad_request_message(qwen3, "chat", inputs)


def test_an_operation_the_text_model_does_not_serve_is_a_bad_request(qwen3):
    assert "speech" in bad_request_message(qwen3, "speech", SpeechInputs("hi"))


def test_the_text_model_knows_its_context_length(qwen3):
    assert qwen3.max_context == 4096
