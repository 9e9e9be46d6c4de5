"""Greedy chat through the server equals direct mlx-lm, token for token, streamed or not."""

from __future__ import annotations

import pytest

from tests.support import direct
from tests.support.server import model_name, openai_client

ARCHS = ["qwen3", "llama"]
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Name three prime numbers and explain why."},
]
MAX_TOKENS = 48


@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_chat_equals_direct_mlx_lm(servers, arch):
    server, path = servers[arch]
    expected = direct.greedy_chat(path, MESSAGES, MAX_TOKENS)

    reply = openai_client(server).chat.completions.create(
        model=model_name(path), messages=MESSAGES, max_tokens=MAX_TOKENS, temperature=0
    )

    assert reply.choices[0].message.content == expected.text
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.prompt_tokens == len(direct.chat_prompt(path, MESSAGES))
    assert reply.usage.completion_tokens == len(expected.tokens) == MAX_TOKENS
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + MAX_TOKENS


@pytest.mark.parametrize("arch", ARCHS)
def test_joined_stream_equals_non_stream_and_direct(servers, arch):
    server, path = servers[arch]
    client = openai_client(server)
    expected = direct.greedy_chat(path, MESSAGES, MAX_TOKENS)

    chunks = list(
        client.chat.completions.create(
            model=model_name(path),
            messages=MESSAGES,
            max_tokens=MAX_TOKENS,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )

    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert content == expected.text
    assert finish == ["length"]
    assert chunks[0].choices[0].delta.role == "assistant"
    usage_chunks = [c for c in chunks if c.usage is not None]
    assert len(usage_chunks) == 1 and usage_chunks[0] is chunks[-1] and not chunks[-1].choices
    assert usage_chunks[0].usage.completion_tokens == MAX_TOKENS
    assert usage_chunks[0].usage.prompt_tokens == len(direct.chat_prompt(path, MESSAGES))


def test_completions_greedy_equals_direct_mlx_lm(default_server, qwen3_path):
    prompt = "def fibonacci(n):"
    expected = direct.greedy(qwen3_path, prompt, 32)
    client = openai_client(default_server)

    reply = client.completions.create(
        model=model_name(qwen3_path), prompt=prompt, max_tokens=32, temperature=0
    )
    streamed = client.completions.create(
        model=model_name(qwen3_path), prompt=prompt, max_tokens=32, temperature=0, stream=True
    )

    assert reply.choices[0].text == expected.text
    assert reply.usage.prompt_tokens == expected.prompt_tokens
    assert reply.usage.completion_tokens == 32
    assert "".join(c.choices[0].text for c in streamed if c.choices) == expected.text


def test_completions_accepts_token_ids(default_server, qwen3_path):
    _, tokenizer = direct.load_model(qwen3_path)
    ids = tokenizer.encode("import os\n")
    expected = direct.greedy(qwen3_path, ids, 16)

    reply = openai_client(default_server).completions.create(
        model=model_name(qwen3_path), prompt=ids, max_tokens=16, temperature=0
    )

    assert reply.choices[0].text == expected.text
    assert reply.usage.prompt_tokens == len(ids)
