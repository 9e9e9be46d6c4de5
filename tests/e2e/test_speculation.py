"""`serve --speculative ngram`: prompt lookup inside continuous batching, through the real
processes. Greedy answers equal direct mlx-lm's (no speculation) token for token, alone,
streamed, and eight at once; the worker's counters say proposals were made and accepted.

The tiny random qwen3 repeats itself, and a prompt that quotes a passage twice gives lookup
something to find, so proposals are made and some accepted (the engine-level tests,
tests/unit/test_speculation_engine.py, cover rejection, rewinding and the prefix cache).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.support import direct
from tests.support.server import model_name, openai_client

PASSAGE = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n"
MAX_TOKENS = 40


def _messages(i: int) -> list[dict]:
    text = f"Copy this code {i} times:\n{PASSAGE}\nAgain:\n{PASSAGE}"
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def speculating(start_server, qwen3_path):
    return start_server(qwen3_path, "--speculative", "ngram", "--num-draft-tokens", "4",
                        name="speculating")  # fmt: skip


def _chat(server, path, messages, stream=False):
    client = openai_client(server)
    if not stream:
        reply = client.chat.completions.create(
            model=model_name(path), messages=messages, max_tokens=MAX_TOKENS, temperature=0
        )
        return reply.choices[0].message.content
    chunks = client.chat.completions.create(
        model=model_name(path), messages=messages, max_tokens=MAX_TOKENS, temperature=0,
        stream=True,
    )  # fmt: skip
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_greedy_answers_equal_direct_mlx_lm_alone_streamed_and_eight_at_once(
    speculating, qwen3_path
):
    before = speculating.stats()
    expected = {i: direct.greedy_chat(qwen3_path, _messages(i), MAX_TOKENS).text for i in range(8)}
    assert _chat(speculating, qwen3_path, _messages(0)) == expected[0]
    assert _chat(speculating, qwen3_path, _messages(1), stream=True) == expected[1]
    with ThreadPoolExecutor(8) as pool:
        answers = pool.map(
            lambda i: _chat(speculating, qwen3_path, _messages(i), stream=i % 2 == 1), range(8)
        )
        together = dict(enumerate(answers))
    assert together == expected
    after = speculating.stats()
    assert after["spec_decode_num_drafts"] > before["spec_decode_num_drafts"]
    assert after["spec_decode_num_accepted_tokens"] > before["spec_decode_num_accepted_tokens"]
    metrics = httpx.get(f"{speculating.url}/metrics", headers=speculating.headers).text
    drafts = [
        line
        for line in metrics.splitlines()
        if line.startswith("vllm:spec_decode_num_drafts_total{")
    ]
    assert drafts and float(drafts[0].rsplit(" ", 1)[1]) >= after["spec_decode_num_drafts"]
    assert 'vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="' in metrics


def test_speculation_is_refused_with_a_distributed_model(qwen3_path):
    import subprocess

    from tests.support.server import CLI

    done = subprocess.run(
        [CLI, "serve", qwen3_path, "--ranks", "2", "--speculative", "ngram", "--port", "1"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0 and "--speculative ngram does not go with a distributed" in (
        done.stderr
    )


@pytest.mark.parametrize("method", ["ngram", "draft"])
def test_speculation_asked_for_a_model_that_is_not_mlx_lm_is_refused_naming_why(tmp_path, method):
    """A vision model cannot speculate: asked for by name, the load fails saying so and the
    server reports it (the default, auto, quietly does not speculate there)."""
    import time

    from tests.support.server import ServerProcess
    from worker.tiny_models import ensure_checkpoint

    args = [str(ensure_checkpoint("qwen2_vl")), "--speculative", method]
    server = ServerProcess(args, tmp_path / "server.log")
    try:
        said = f"--speculative {method}: speculative decoding runs on mlx-lm text models"
        deadline = time.monotonic() + 120
        while said not in server.log() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert said in server.log()
        health = server.health()
        assert health.status_code == 503, health.text
    finally:
        server.stop()
