"""Stop strings, max_tokens, EOS, seeds and usage through the real server."""

from __future__ import annotations

import httpx

from tests.support import direct
from tests.support.server import model_name, openai_client

MESSAGES = [{"role": "user", "content": "Write a long story about a lighthouse keeper."}]


def _stop_string_inside(text: str) -> str:
    """A short piece of `text` whose first occurrence starts well after the beginning."""
    for start in range(len(text) // 3, len(text) - 4):
        candidate = text[start : start + 3]
        if candidate.strip() and text.find(candidate) == start:
            return candidate
    raise AssertionError(f"no usable stop string in {text!r}")


def test_stop_string_truncates_and_is_never_leaked(default_server, qwen3_path):
    client = openai_client(default_server)
    full = direct.greedy_chat(qwen3_path, MESSAGES, 60).text
    stop = _stop_string_inside(full)
    expected = full[: full.find(stop)]

    reply = client.chat.completions.create(
        model=model_name(qwen3_path), messages=MESSAGES, max_tokens=60, temperature=0, stop=[stop]
    )
    stream = client.chat.completions.create(
        model=model_name(qwen3_path),
        messages=MESSAGES,
        max_tokens=60,
        temperature=0,
        stop=stop,
        stream=True,
    )
    chunks = [c for c in stream if c.choices]

    assert reply.choices[0].message.content == expected
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.completion_tokens < 60
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == expected
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_max_tokens_ends_with_length(default_server, qwen3_path):
    reply = openai_client(default_server).chat.completions.create(
        model=model_name(qwen3_path), messages=MESSAGES, max_completion_tokens=5, temperature=0
    )
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.completion_tokens == 5


def test_logit_bias_forcing_eos_ends_with_stop_and_counts_it(default_server, qwen3_path):
    _, tokenizer = direct.load_model(qwen3_path)
    eos = tokenizer.eos_token_id

    reply = openai_client(default_server).chat.completions.create(
        model=model_name(qwen3_path),
        messages=MESSAGES,
        max_tokens=20,
        temperature=0,
        logit_bias={str(eos): 100},
    )

    assert reply.choices[0].finish_reason == "stop"
    assert reply.choices[0].message.content == ""
    assert reply.usage.completion_tokens == 1


def test_seeded_sampling_is_reproducible(default_server, qwen3_path):
    client = openai_client(default_server)

    def sample(seed: int) -> str:
        reply = client.chat.completions.create(
            model=model_name(qwen3_path),
            messages=MESSAGES,
            max_tokens=24,
            temperature=1.0,
            top_p=0.95,
            seed=seed,
        )
        return reply.choices[0].message.content

    first = sample(1234)
    assert sample(1234) == first
    assert sample(99) != first


def test_default_sampling_comes_from_generation_config_and_varies(default_server, qwen3_path):
    """No temperature given: the checkpoint's generation_config (temperature 0.6) applies, so
    unseeded outputs differ between calls while greedy ones would not."""
    client = openai_client(default_server)
    outputs = {
        client.chat.completions.create(
            model=model_name(qwen3_path), messages=MESSAGES, max_tokens=24
        )
        .choices[0]
        .message.content
        for _ in range(3)
    }
    assert len(outputs) > 1


def test_raw_sse_stream_ends_with_done(default_server, qwen3_path):
    body = {
        "model": model_name(qwen3_path),
        "messages": MESSAGES,
        "max_tokens": 4,
        "temperature": 0,
        "stream": True,
    }
    with httpx.stream(
        "POST",
        f"{default_server.url}/v1/chat/completions",
        json=body,
        headers=default_server.headers,
        timeout=60,
    ) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in r.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
