"""Prompts that do not fit, in the shape agents react to, and max_tokens past the context.

OpenAI clients look for `code: "context_length_exceeded"`; Claude Code compacts its history when
an Anthropic 400 says `prompt is too long: N tokens > M maximum`. A max_tokens larger than the
room the prompt leaves is clamped to that room (the answer ends with `length`); one past the
model's whole context is a 400 naming the limit (in Anthropic's words, which Claude Code reads to
retry with the limit); one past 64 bits is a 400.
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
            max_tokens=CONTEXT,
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
        model=model_name(qwen3_path), prompt=prompt, max_tokens=CONTEXT, temperature=0
    )
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.completion_tokens == 6


@pytest.mark.parametrize("api", ["completions", "chat", "responses"])
def test_max_tokens_past_the_whole_context_is_a_400_naming_the_limit(
    default_server, qwen3_path, api
):
    client, model = openai_client(default_server), model_name(qwen3_path)
    with pytest.raises(openai.BadRequestError) as caught:
        if api == "completions":
            client.completions.create(model=model, prompt="hi", max_tokens=10**12)
        elif api == "chat":
            client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "hi"}],
                max_completion_tokens=10**12,
            )  # fmt: skip
        else:
            client.responses.create(model=model, input="hi", max_output_tokens=10**12)
    field = {"completions": "max_tokens", "chat": "max_completion_tokens"}.get(
        api, "max_output_tokens"
    )
    assert caught.value.body["param"] == field
    assert f"context of {CONTEXT} tokens" in caught.value.body["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_max_tokens_past_the_context_is_a_400_claude_code_retries_on(
    claude, qwen3_path, stream
):
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model=model_name(qwen3_path),
            max_tokens=CONTEXT + 1,
            messages=[{"role": "user", "content": "hi"}],
            stream=stream,
        )
    message = caught.value.body["error"]["message"]
    # the pattern Claude Code 2.1's bundle matches to retry with the limit it names
    claude_code = (
        r"^max_tokens: \d+ > (\d+), which is the maximum allowed number of output tokens for .+$"
    )
    match = re.match(claude_code, message)
    assert match and int(match[1]) == CONTEXT, message


def test_max_tokens_past_64_bits_is_a_400_naming_it(default_server, qwen3_path):
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client(default_server).completions.create(
            model=model_name(qwen3_path), prompt="hi", max_tokens=2**64
        )
    assert caught.value.body["param"] == "max_tokens"
    assert "64-bit" in caught.value.body["message"]


def _rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_12_mb_prompt_is_refused_at_once_without_stalling_others(default_server, qwen3_path):
    """Tokenizing 12 MB took the worker 15-30 s and gigabytes; the bound before tokenizing
    answers at once, and a small chat sent alongside is not held up."""
    import threading
    import time

    import httpx

    model = model_name(qwen3_path)
    url, headers = default_server.url, default_server.headers
    small = {"model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}

    def timed_small() -> float:
        started = time.perf_counter()
        r = httpx.post(f"{url}/v1/chat/completions", json=small, headers=headers, timeout=60)
        assert r.status_code == 200, r.text
        return time.perf_counter() - started

    timed_small()  # warm
    alone = min(timed_small() for _ in range(3))
    worker = default_server.worker_pid()
    before = _rss_mb(worker)
    huge = {"model": model, "messages": [{"role": "user", "content": "a " * 6_000_000}]}
    answers: dict = {}

    def send_huge() -> None:
        started = time.perf_counter()
        answers["huge"] = httpx.post(
            f"{url}/v1/chat/completions", json=huge, headers=headers, timeout=120
        )
        answers["huge_s"] = time.perf_counter() - started

    thread = threading.Thread(target=send_huge)
    thread.start()
    time.sleep(0.3)  # the huge body is on its way
    beside = timed_small()
    thread.join()
    assert answers["huge"].status_code == 400
    assert answers["huge"].json()["error"]["code"] == "context_length_exceeded"
    assert answers["huge_s"] < 2.0, answers["huge_s"]
    assert beside - alone < 1.0, (beside, alone)
    tokenized = httpx.post(
        f"{url}/tokenize", json={"model": model, "prompt": "a " * 7_000_000},
        headers=headers, timeout=120,
    )  # fmt: skip
    assert tokenized.status_code == 400 and "too long" in tokenized.text
    assert _rss_mb(worker) - before < 100
