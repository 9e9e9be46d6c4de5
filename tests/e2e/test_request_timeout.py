"""A request's own `timeout` (an extension on chat and completions): once it passes, the
request ends as max_tokens would end it, with what it generated and finish_reason "length",
streamed or not; a malformed value is a 400 naming it."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.support.server import model_name, openai_client

MAX_TOKENS = 3000  # far more than the tiny model writes in the timeout


@pytest.mark.parametrize("stream", [False, True])
def test_a_chat_ends_with_length_when_its_timeout_passes(default_server, qwen3_path, stream):
    client = openai_client(default_server)
    kwargs = {"model": model_name(qwen3_path), "messages": [{"role": "user", "content": "Go."}],
              "max_tokens": MAX_TOKENS, "temperature": 0, "extra_body": {"timeout": 0.5}}  # fmt: skip
    started = time.monotonic()
    if stream:
        chunks = list(client.chat.completions.create(stream=True, **kwargs))
        finish = [c.choices[0].finish_reason for c in chunks if c.choices][-1]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        reply = client.chat.completions.create(**kwargs)
        finish, text = reply.choices[0].finish_reason, reply.choices[0].message.content
        assert 0 < reply.usage.completion_tokens < MAX_TOKENS
    assert finish == "length" and text
    assert time.monotonic() - started < 10


def test_a_completion_ends_with_length_when_its_timeout_passes(default_server, qwen3_path):
    reply = openai_client(default_server).completions.create(
        model=model_name(qwen3_path), prompt="Once", max_tokens=MAX_TOKENS, temperature=0,
        extra_body={"timeout": 0.5},
    )  # fmt: skip
    assert reply.choices[0].finish_reason == "length"
    assert 0 < reply.usage.completion_tokens < MAX_TOKENS


@pytest.mark.parametrize("value", [0, -1, "soon", 10**9])
def test_a_malformed_timeout_is_a_400_naming_it(default_server, qwen3_path, value):
    body = {"model": model_name(qwen3_path), "messages": [{"role": "user", "content": "Go."}],
            "timeout": value}  # fmt: skip
    reply = httpx.post(f"{default_server.url}/v1/chat/completions", json=body,
                       headers=default_server.headers, timeout=60)  # fmt: skip
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "timeout", reply.text
