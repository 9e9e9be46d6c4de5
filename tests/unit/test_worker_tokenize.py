"""The worker's tokenize / detokenize control calls (vLLM's /tokenize and /detokenize): the
ids are the ones generation builds, special tokens and chat options as vLLM has them."""

from __future__ import annotations

import queue

import pytest

from protocol.inputs import CompleteInputs, SamplingParams
from protocol.messages import (
    ControlCall,
    ControlMethod,
    DetokenizeArgs,
    ErrorCode,
    TokenizeArgs,
)
from tests.support.inputs import chat
from worker.runtime.errors import RequestError
from worker.runtime.handoff import Handoff
from worker.runtime.io_threads import Receiver
from worker.runtime.stats import WorkerStats
from worker.text.model import load_text_model
from worker.text.prompts import chat_prompt_tokens, prompt_for
from worker.text.token_counting import TokenizerCalls, detokenize, tokenize
from worker.tiny_models import ensure_checkpoint

MESSAGES = [{"role": "user", "content": "Hello there"}]
PREFILL = [*MESSAGES, {"role": "assistant", "content": "Sure, th"}]


@pytest.fixture(scope="module")
def qwen3():
    return load_text_model(str(ensure_checkpoint("qwen3")))


@pytest.fixture(scope="module")
def llama():  # its tokenizer has a BOS token, its template writes it
    return load_text_model(str(ensure_checkpoint("llama")))


def tokens(text_model, **args) -> list[int]:
    return tokenize(text_model.tokenizer, TokenizeArgs(**args)).tokens


def bad_request(text_model, call, args) -> str:
    with pytest.raises(RequestError) as caught:
        call(text_model.tokenizer, args)
    assert caught.value.code == ErrorCode.BAD_REQUEST
    return caught.value.message


@pytest.mark.parametrize("name", ["qwen3", "llama"])
def test_a_prompt_is_what_a_completion_of_it_is_served_with(name, request):
    model = request.getfixturevalue(name)
    served = prompt_for(model, CompleteInputs("Hello world", SamplingParams(1)))
    assert tokens(model, prompt="Hello world") == served
    assert tokens(model, prompt="Hello world", add_special_tokens=True) == served


def test_add_special_tokens_adds_the_bos_but_never_a_second_one(llama):
    bos = llama.tokenizer.bos_token_id
    plain = llama.tokenizer.encode("Hello world", add_special_tokens=False)
    assert tokens(llama, prompt="Hello world") == [bos, *plain]
    assert tokens(llama, prompt="Hello world", add_special_tokens=False) == plain
    with_bos = tokens(llama, prompt=llama.tokenizer.bos_token + "Hello world")
    assert with_bos == [bos, *plain]


def test_an_empty_prompt_has_no_tokens_but_its_special_ones(qwen3, llama):
    assert tokens(qwen3, prompt="") == []
    assert tokens(llama, prompt="") == [llama.tokenizer.bos_token_id]


@pytest.mark.parametrize("name", ["qwen3", "llama"])
def test_a_chat_is_what_a_chat_request_is_served_with(name, request):
    model = request.getfixturevalue(name)
    inputs = chat(MESSAGES, chat_template_kwargs={"enable_thinking": False})
    assert tokens(model, chat=inputs) == chat_prompt_tokens(model.tokenizer, inputs)
    assert tokens(model, chat=inputs) == prompt_for(model, inputs)


def test_a_chat_without_the_generation_prompt_ends_after_the_last_message(qwen3):
    with_prompt = qwen3.tokenizer.decode(tokens(qwen3, chat=chat(MESSAGES)))
    without = qwen3.tokenizer.decode(
        tokens(qwen3, chat=chat(MESSAGES), add_generation_prompt=False)
    )
    assert with_prompt.endswith("<|im_start|>assistant\n")
    assert with_prompt.startswith(without) and not without.endswith("assistant\n")


def test_continue_final_message_leaves_the_last_message_open(qwen3, llama):
    for model in (qwen3, llama):
        ids = tokens(
            model, chat=chat(PREFILL), add_generation_prompt=False, continue_final_message=True
        )
        assert model.tokenizer.decode(ids).endswith("Sure, th")


def test_continue_final_message_with_the_generation_prompt_is_a_bad_request(qwen3):
    args = TokenizeArgs(chat=chat(PREFILL), continue_final_message=True)
    assert "add_generation_prompt" in bad_request(qwen3, tokenize, args)


def test_chat_template_kwargs_may_not_set_continue_final_message(qwen3):
    inputs = chat(PREFILL, chat_template_kwargs={"continue_final_message": True})
    message = bad_request(qwen3, tokenize, TokenizeArgs(chat=inputs))
    assert "continue_final_message" in message


def test_add_special_tokens_on_a_chat_adds_them_on_top_of_the_template(llama):
    bos = llama.tokenizer.bos_token_id
    plain = tokens(llama, chat=chat(MESSAGES))
    assert plain[0] == bos and plain[1] != bos
    assert tokens(llama, chat=chat(MESSAGES), add_special_tokens=True) == [bos, *plain]
    assert tokens(llama, chat=chat(MESSAGES), add_special_tokens=False) == plain


def test_token_strings_are_the_tokenizers_and_only_when_asked(qwen3):
    result = tokenize(qwen3.tokenizer, TokenizeArgs(prompt="Hello world"))
    assert result.token_strs is None
    asked = tokenize(qwen3.tokenizer, TokenizeArgs(prompt="Hello world", return_token_strs=True))
    assert asked.tokens == result.tokens
    assert asked.token_strs == qwen3.tokenizer.convert_ids_to_tokens(result.tokens)
    assert "".join(asked.token_strs or []).replace("Ġ", " ") == "Hello world"


def test_detokenize_decodes_what_tokenize_encoded(qwen3):
    text = "Hello world, héllo\nagain"
    ids = tokens(qwen3, prompt=text)
    assert detokenize(qwen3.tokenizer, DetokenizeArgs(ids)) == text
    assert detokenize(qwen3.tokenizer, DetokenizeArgs([])) == ""


def test_an_id_outside_the_vocabulary_is_a_bad_request_naming_it(qwen3):
    size = len(qwen3.tokenizer)
    message = bad_request(qwen3, detokenize, DetokenizeArgs([1, size]))
    assert "`tokens[1]`" in message and str(size) in message
    assert "`tokens[0]`" in bad_request(qwen3, detokenize, DetokenizeArgs([-1]))


def test_tokenize_needs_a_prompt_or_a_chat(qwen3):
    assert "prompt or a chat" in bad_request(qwen3, tokenize, TokenizeArgs())


# -- the receiver thread's replies ----------------------------------------------------------


def reply(tokenizer, call: ControlCall):
    outbox: queue.SimpleQueue = queue.SimpleQueue()
    receiver = Receiver(None, Handoff(), outbox, WorkerStats(model="m"))
    if tokenizer is not None:
        receiver.set_tokenizer(TokenizerCalls(tokenizer))
    receiver._on_control(call)
    return outbox.get_nowait()


def test_the_tokenize_call_replies_the_tokens(qwen3):
    args = TokenizeArgs(prompt="Hello", return_token_strs=True)
    got = reply(qwen3.tokenizer, ControlCall(3, ControlMethod.TOKENIZE, tokenize=args))
    assert got.ok and got.call_id == 3
    assert got.tokenized == tokenize(qwen3.tokenizer, args)


def test_the_detokenize_call_replies_the_text_or_the_error(qwen3):
    ids = tokens(qwen3, prompt="Hello")
    call = ControlCall(4, ControlMethod.DETOKENIZE, detokenize=DetokenizeArgs(ids))
    assert reply(qwen3.tokenizer, call).text == "Hello"
    call = ControlCall(5, ControlMethod.DETOKENIZE, detokenize=DetokenizeArgs([10**9]))
    got = reply(qwen3.tokenizer, call)
    assert not got.ok and "tokens[0]" in got.error


@pytest.mark.parametrize(
    ("method", "verb"),
    [(ControlMethod.TOKENIZE, "tokenize"), (ControlMethod.DETOKENIZE, "detokenize")],
)
def test_a_model_without_a_tokenizer_replies_an_error(method, verb):
    call = ControlCall(6, method, tokenize=TokenizeArgs("x"), detokenize=DetokenizeArgs([1]))
    got = reply(None, call)
    assert not got.ok and f"does not {verb}" in got.error


def test_a_call_without_its_arguments_replies_an_error(qwen3):
    assert not reply(qwen3.tokenizer, ControlCall(8, ControlMethod.TOKENIZE)).ok
    assert not reply(qwen3.tokenizer, ControlCall(9, ControlMethod.DETOKENIZE)).ok
