"""`POST /tokenize` and `POST /detokenize` (vLLM's shapes) against the real server: the ids
are the checkpoint tokenizer's own, a chat's count is what a chat request is served with, and
bad input is a 400 naming the field."""

from __future__ import annotations

from functools import cache

import httpx
import pytest

from tests.support import direct
from tests.support.server import model_name, openai_client

CONTEXT = 4096  # the tiny checkpoints' max_position_embeddings
PROMPT = "The lighthouse keeper counted ships, héllo\nand waves."
MESSAGES = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Name a colour."},
]
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@cache
def hf_tokenizer(path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


@pytest.fixture(scope="module")
def post(default_server):
    def post(path: str, body: dict) -> httpx.Response:
        return httpx.post(
            f"{default_server.url}{path}", json=body, headers=default_server.headers, timeout=60
        )

    return post


def tokenize(post, body: dict) -> dict:
    got = post("/tokenize", body)
    assert got.status_code == 200, got.text
    return got.json()


def test_a_prompt_is_the_checkpoint_tokenizers_ids(post, qwen3_path):
    body = tokenize(post, {"model": model_name(qwen3_path), "prompt": PROMPT})
    expected = hf_tokenizer(qwen3_path).encode(PROMPT)
    assert body == {
        "count": len(expected),
        "max_model_len": CONTEXT,
        "tokens": expected,
        "token_strs": None,
    }
    plain = tokenize(post, {"prompt": PROMPT, "add_special_tokens": False})["tokens"]
    assert plain == hf_tokenizer(qwen3_path).encode(PROMPT, add_special_tokens=False)


def test_a_prompts_count_is_a_completions_prompt_tokens(default_server, post, qwen3_path):
    count = tokenize(post, {"prompt": PROMPT})["count"]
    reply = openai_client(default_server).completions.create(
        model=model_name(qwen3_path), prompt=PROMPT, max_tokens=1, temperature=0
    )
    assert count == reply.usage.prompt_tokens


def test_special_tokens_are_the_completions_on_a_model_with_a_bos(llama_server, llama_path):
    def tokens(body: dict) -> list[int]:
        got = httpx.post(f"{llama_server.url}/tokenize", json=body, headers=llama_server.headers)
        assert got.status_code == 200, got.text
        return got.json()["tokens"]

    tokenizer = hf_tokenizer(llama_path)
    assert tokens({"prompt": PROMPT}) == tokenizer.encode(PROMPT)
    assert tokens({"prompt": PROMPT})[0] == tokenizer.bos_token_id
    assert tokens({"prompt": PROMPT, "add_special_tokens": False}) == tokenizer.encode(
        PROMPT, add_special_tokens=False
    )
    # A text that starts with the BOS gets no second one, as a completion of it does not.
    with_bos = tokens({"prompt": tokenizer.bos_token + PROMPT})
    assert with_bos == tokenizer.encode(PROMPT)
    reply = openai_client(llama_server).completions.create(
        model=model_name(llama_path), prompt=tokenizer.bos_token + PROMPT, max_tokens=1
    )
    assert reply.usage.prompt_tokens == len(with_bos)
    # A chat's template writes the BOS; add_special_tokens adds another, as in vLLM.
    chat = tokens({"messages": MESSAGES})
    assert chat == direct.chat_prompt(llama_path, MESSAGES) and chat[0] == tokenizer.bos_token_id
    assert tokens({"messages": MESSAGES, "add_special_tokens": True}) == [chat[0], *chat]


def test_a_chats_count_is_a_greedy_chat_requests_prompt_tokens(default_server, post, qwen3_path):
    client = openai_client(default_server)
    for extra in ({}, {"tools": [TOOL]}):
        body = tokenize(post, {"model": model_name(qwen3_path), "messages": MESSAGES, **extra})
        reply = client.chat.completions.create(
            model=model_name(qwen3_path), messages=MESSAGES, max_tokens=2, temperature=0, **extra
        )
        assert body["count"] == reply.usage.prompt_tokens == len(body["tokens"])
    plain = tokenize(post, {"messages": MESSAGES})["tokens"]
    assert plain == direct.chat_prompt(qwen3_path, MESSAGES)


def test_chat_options_shape_the_prompt(post, qwen3_path):
    full = tokenize(post, {"messages": MESSAGES})["tokens"]
    bare = tokenize(post, {"messages": MESSAGES, "add_generation_prompt": False})["tokens"]
    assert full[: len(bare)] == bare and len(full) > len(bare)
    prefill = [*MESSAGES, {"role": "assistant", "content": "Teal, or"}]
    opened = tokenize(post, {"messages": prefill, "continue_final_message": True})["tokens"]
    assert hf_tokenizer(qwen3_path).decode(opened).endswith("Teal, or")
    kwargs = {"chat_template_kwargs": {"enable_thinking": False}}
    assert tokenize(post, {"messages": MESSAGES, **kwargs})["tokens"] != full


def test_token_strings_come_when_asked(post, qwen3_path):
    body = tokenize(post, {"prompt": PROMPT, "return_token_strs": True})
    assert body["token_strs"] == hf_tokenizer(qwen3_path).convert_ids_to_tokens(body["tokens"])
    chat = tokenize(post, {"messages": MESSAGES, "return_token_strs": True})
    assert len(chat["token_strs"]) == chat["count"]


def test_detokenize_undoes_tokenize(post, qwen3_path):
    for text in (PROMPT, "", "  spaces  and\ttabs "):
        tokens = tokenize(post, {"prompt": text})["tokens"]
        got = post("/detokenize", {"model": model_name(qwen3_path), "tokens": tokens})
        assert got.status_code == 200 and got.json() == {"prompt": text}
    chat = tokenize(post, {"messages": MESSAGES})["tokens"]
    decoded = post("/detokenize", {"tokens": chat}).json()["prompt"]
    assert decoded == hf_tokenizer(qwen3_path).decode(chat)
    assert "Name a colour." in decoded


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/tokenize", {"prompt": "x", "max_tokens": 3}, "max_tokens"),
        ("/tokenize", {"prompt": 5}, "prompt"),
        ("/tokenize", {}, "prompt"),
        ("/tokenize", {"prompt": "x", "messages": MESSAGES}, "prompt"),
        ("/tokenize", {"prompt": "x", "add_generation_prompt": True}, "add_generation_prompt"),
        ("/tokenize", {"messages": MESSAGES, "chat_template": "{{ 1 }}"}, "chat_template"),
        ("/tokenize", {"messages": [{"role": "user"}]}, "messages[0].content"),
        ("/tokenize", {"prompt": "x", "model": "no-such-model"}, "model"),
        ("/detokenize", {"tokens": [1, -2]}, "tokens"),
        ("/detokenize", {"tokens": [1, 10**9]}, "tokens"),
        ("/detokenize", {"tokens": [1, CONTEXT + 5]}, "tokens"),
        ("/detokenize", {"tokens": "1"}, "tokens"),
        ("/detokenize", {"tokens": [1], "skip_special_tokens": True}, "skip_special_tokens"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(post, path, body, param):
    got = post(path, body)
    error = got.json()["error"]
    assert got.status_code == (404 if param == "model" else 400), got.text
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"


def test_an_id_past_the_vocabulary_says_which(post, qwen3_path):
    size = len(hf_tokenizer(qwen3_path))
    error = post("/detokenize", {"tokens": [1, 2, size]}).json()["error"]
    assert "`tokens[2]`" in error["message"] and str(size) in error["message"]
