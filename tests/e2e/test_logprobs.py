"""Logprobs through the real server equal what mlx-lm's `generate_step` computes directly
(greedy, so the tokens match too): chat `logprobs` + `top_logprobs`, completions `logprobs`."""

from __future__ import annotations

from functools import lru_cache

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.generate import generate_step

from tests.support import direct
from tests.support.server import model_name, openai_client

MESSAGES = [{"role": "user", "content": "Count to ten."}]
MAX_TOKENS = 8
TOP = 3
TOLERANCE = 1e-4


@lru_cache(maxsize=4)
def reference(path: str, prompt: tuple[int, ...]) -> list[tuple[float, list[float]]]:
    """(chosen token's logprob, top-TOP logprobs) per greedy step, as mlx-lm computes them."""
    model, tokenizer = direct.load_model(path)
    steps = []
    for (token, logprobs), _ in zip(
        generate_step(mx.array(list(prompt)), model, sampler=lambda x: mx.argmax(x, axis=-1)),
        range(MAX_TOKENS),
        strict=False,
    ):
        values = np.array(logprobs.astype(mx.float32))
        top = np.sort(values)[::-1][:TOP]
        steps.append((float(values[int(token)]), [float(v) for v in top]))
        if int(token) in tokenizer.eos_token_ids:
            break
    return steps


def test_chat_logprobs_equal_direct_mlx_lm(default_server, qwen3_path):
    expected = reference(qwen3_path, tuple(direct.chat_prompt(qwen3_path, MESSAGES)))

    reply = openai_client(default_server).chat.completions.create(
        model=model_name(qwen3_path),
        messages=MESSAGES,
        max_tokens=MAX_TOKENS,
        temperature=0,
        logprobs=True,
        top_logprobs=TOP,
    )

    content = reply.choices[0].logprobs.content
    assert len(content) == len(expected) == reply.usage.completion_tokens
    for entry, (chosen, top) in zip(content, expected, strict=True):
        assert entry.logprob == pytest.approx(chosen, abs=TOLERANCE)
        assert [t.logprob for t in entry.top_logprobs] == pytest.approx(top, abs=TOLERANCE)
        assert entry.top_logprobs[0].token == entry.token  # greedy: the chosen one is the top
    assert "".join(e.token for e in content) == reply.choices[0].message.content


def test_streamed_chat_logprobs_equal_the_non_streamed(default_server, qwen3_path):
    client = openai_client(default_server)
    kwargs = dict(
        model=model_name(qwen3_path),
        messages=MESSAGES,
        max_tokens=MAX_TOKENS,
        temperature=0,
        logprobs=True,
        top_logprobs=TOP,
    )
    whole = client.chat.completions.create(**kwargs).choices[0].logprobs.content
    streamed = [
        entry
        for chunk in client.chat.completions.create(stream=True, **kwargs)
        if chunk.choices and chunk.choices[0].logprobs
        for entry in chunk.choices[0].logprobs.content
    ]
    assert [(e.token, e.logprob) for e in streamed] == [(e.token, e.logprob) for e in whole]


def test_completion_logprobs_equal_direct_mlx_lm(default_server, qwen3_path):
    prompt = direct.chat_prompt(qwen3_path, MESSAGES)  # token ids: no tokenization ambiguity
    expected = reference(qwen3_path, tuple(prompt))

    reply = openai_client(default_server).completions.create(
        model=model_name(qwen3_path),
        prompt=prompt,
        max_tokens=MAX_TOKENS,
        temperature=0,
        logprobs=TOP,
    )

    logprobs = reply.choices[0].logprobs
    assert logprobs.token_logprobs == pytest.approx([c for c, _ in expected], abs=TOLERANCE)
    for alternatives, (_, top) in zip(logprobs.top_logprobs, expected, strict=True):
        # A {token: logprob} map: tokens that decode alike (e.g. partial UTF-8) share a key.
        assert max(alternatives.values()) == pytest.approx(top[0], abs=TOLERANCE)
        assert all(min(abs(v - t) for t in top) < TOLERANCE for v in alternatives.values())
    assert "".join(logprobs.tokens) == reply.choices[0].text
    assert logprobs.text_offset[0] == 0
