"""Prompts that do not fit, in the shape agents react to, and max_tokens past the context.

OpenAI clients look for `code: "context_length_exceeded"`; Claude Code compacts its history when
an Anthropic 400 says `prompt is too long: N tokens > M maximum`. A max_tokens larger than the
room the prompt leaves is clamped to that room (the answer ends with `length`); one past 64 bits
is a 400.
"""

from __future__ import annotations

import re

import anthropic
import openai
import pytest

from tests.support.server import model_name, openai_client

CONTEXT = 4096  # the tiny checkpoints' max_position_embeddings
TOO_LONG = re.compile(r"^prompt is too long: (\d+) tokens > (\d+) maximum$")


@pytest.fixture(scope="module")
def claude(default_server) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=default_server.url, api_key=default_server.api_key, max_retries=0, timeout=120
    )


@pytest.mark.parametrize("stream", [False, True])
def test_openai_overflow_is_context_length_exceeded(default_server, qwen3_path, stream):
    client = openai_client(default_server)
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(
            model=model_name(qwen3_path), prompt=[5] * (CONTEXT + 10), max_tokens=4, stream=stream
        )
    error = caught.value.body
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
    assert f"maximum context length is {CONTEXT} tokens" in error["message"]
    assert f"resulted in {CONTEXT + 10} tokens" in error["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_overflow_says_prompt_is_too_long(claude, qwen3_path, stream):
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model=model_name(qwen3_path),
            max_tokens=32000,
            messages=[{"role": "user", "content": "lighthouse " * CONTEXT}],
            stream=stream,
        )
    error = caught.value.body["error"]
    assert error["type"] == "invalid_request_error"
    match = TOO_LONG.match(error["message"])
    assert match, error["message"]
    assert int(match[1]) > int(match[2]) == CONTEXT - 1


def test_max_tokens_past_the_context_is_clamped_to_the_room_left(default_server, qwen3_path):
    prompt = [5] * (CONTEXT - 6)
    reply = openai_client(default_server).completions.create(
        model=model_name(qwen3_path), prompt=prompt, max_tokens=10**12, temperature=0
    )
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.completion_tokens == 6


def test_max_tokens_past_64_bits_is_a_400_naming_it(default_server, qwen3_path):
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client(default_server).completions.create(
            model=model_name(qwen3_path), prompt="hi", max_tokens=2**64
        )
    assert caught.value.body["param"] == "max_tokens"
    assert "64-bit" in caught.value.body["message"]
