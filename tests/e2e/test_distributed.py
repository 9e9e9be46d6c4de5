"""A model split across two ranks of an MLX distributed group (`serve --ranks 2`), on loopback
with the ring backend: tensor parallel Llama, against the real gateway, launcher and ranks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support import direct
from tests.support.server import CLI, SAME_BLAS, model_name, openai_client, pid_alive
from worker.tiny_models import ensure_checkpoint

LINUX = sys.platform.startswith("linux")  # the ranks are found in /proc
PROMPTS = ["The capital of France is", "Once upon a time", "def fibonacci(n):"]
MAX_TOKENS = 24


@pytest.fixture(scope="module")
def group_server(start_server, llama_path):
    server = start_server(llama_path, "--ranks", "2", *SAME_BLAS, name="distributed")
    yield server
    server.stop()  # its ranks would otherwise poll the ring until the session ends


def _rank_pids(rank0_pid: int) -> dict[int, int]:
    """{rank: pid} of the group rank 0 belongs to (the launcher's children, by MLX_RANK)."""
    launcher = int(Path(f"/proc/{rank0_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    ranks = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        rank = [e for e in env if e.startswith(b"MLX_RANK=")]
        if ppid == launcher and rank:
            ranks[int(rank[0].split(b"=")[1])] = int(entry.name)
    return ranks


def test_two_ranks_equal_one_process_streamed_and_not_concurrently(group_server, llama_path):
    client = openai_client(group_server)
    name = model_name(llama_path)
    health = group_server.wait_healthy()
    assert not LINUX or set(_rank_pids(health["worker_pid"])) == {0, 1}
    results: dict[tuple[str, bool], str] = {}

    def run(prompt: str, stream: bool) -> None:
        kwargs = dict(model=name, prompt=prompt, max_tokens=MAX_TOKENS, temperature=0)
        if stream:
            chunks = client.completions.create(**kwargs, stream=True)
            results[prompt, stream] = "".join(c.choices[0].text for c in chunks if c.choices)
        else:
            results[prompt, stream] = client.completions.create(**kwargs).choices[0].text

    threads = [threading.Thread(target=run, args=(p, s)) for p in PROMPTS for s in (False, True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for prompt in PROMPTS:
        expected = direct.greedy(llama_path, prompt, MAX_TOKENS).text
        assert results[prompt, False] == expected, prompt
        assert results[prompt, True] == expected, prompt


def test_sampled_requests_agree_across_ranks(group_server, llama_path):
    """Unseeded sampling draws the same key on every rank: a diverged rank would garble the
    tensor-parallel sums, so two identical seeded requests must still match each other."""
    client = openai_client(group_server)
    kwargs = dict(model=model_name(llama_path), prompt="Hello", max_tokens=16, temperature=1.0)
    first = client.completions.create(**kwargs, seed=7).choices[0].text
    assert client.completions.create(**kwargs, seed=7).choices[0].text == first
    assert client.completions.create(**kwargs).choices[0].finish_reason == "length"


@pytest.mark.skipif(not LINUX, reason="finds rank 1 in /proc")
def test_killing_rank_1_ends_open_streams_and_the_group_comes_back(start_server, llama_path):
    server = start_server(
        llama_path, "--ranks", "2", "--restart-backoff-max", "0.5", name="rank-kill"
    )
    try:
        _kill_rank_1_and_come_back(server, llama_path)
    finally:
        server.stop()


def _kill_rank_1_and_come_back(server, llama_path) -> None:
    rank0 = server.worker_pid()
    ranks = _rank_pids(rank0)
    body = {"model": model_name(llama_path), "prompt": "Tell me", "max_tokens": 3000}
    lines: list[str] = []
    with httpx.stream(
        "POST", f"{server.url}/v1/completions", json={**body, "stream": True},
        headers=server.headers, timeout=120,
    ) as r:  # fmt: skip
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue  # the blank separators, and the keep-alive comments of a stalled stream
            lines.append(line)
            if len(lines) == 5:
                os.kill(ranks[1], signal.SIGKILL)
    events = [json.loads(line[6:]) for line in lines[:-1]]
    assert lines[-1] == "data: [DONE]"
    assert "error" in events[-1], events[-1]

    # The error may come from rank 0 itself (its collective failed) before mlx.launch stops the
    # group and the supervisor sees it go: /health reports the old group until then.
    deadline = time.monotonic() + 120
    health = server.wait_healthy(timeout=120)
    while health["worker_pid"] == rank0 and time.monotonic() < deadline:
        time.sleep(0.1)
        health = server.wait_healthy(timeout=max(1.0, deadline - time.monotonic()))
    assert health["worker_pid"] != rank0 and health["restarts"] == 1
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in ranks.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(pid_alive(p) for p in ranks.values()), "a rank of the old group lives on"
    assert set(_rank_pids(health["worker_pid"])) == {0, 1}
    reply = openai_client(server).completions.create(
        model=model_name(llama_path), prompt="Again", max_tokens=3
    )
    assert reply.choices[0].finish_reason == "length"


def test_a_swap_restarts_the_group_with_the_new_model(group_server, qwen3_path, llama_path):
    done = subprocess.run(
        [CLI, "models", "load", qwen3_path, "--url", group_server.url,
         "--admin-key", group_server.admin_key],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    health = group_server.wait_healthy()
    assert not LINUX or set(_rank_pids(health["worker_pid"])) == {0, 1}
    reply = openai_client(group_server).completions.create(
        model=model_name(qwen3_path), prompt="After the swap", max_tokens=12, temperature=0
    )
    assert reply.choices[0].text == direct.greedy(qwen3_path, "After the swap", 12).text


def test_pipeline_parallel_qwen2_equals_one_process(start_server):
    """Qwen2 split by layers (`--parallel pipeline`: rank 1 runs the first layer, rank 0 the
    last, then the hidden state is gathered): the same greedy tokens as one process."""
    path = str(ensure_checkpoint("qwen2"))
    server = start_server(path, "--ranks", "2", "--parallel", "pipeline", *SAME_BLAS, name="pp")
    try:
        _pipeline_equals_direct(server, path)
    finally:
        server.stop()


def _pipeline_equals_direct(server, path: str) -> None:
    client = openai_client(server)
    for prompt in PROMPTS[:2]:
        expected = direct.greedy(path, prompt, MAX_TOKENS).text
        kwargs = dict(model=model_name(path), prompt=prompt, max_tokens=MAX_TOKENS, temperature=0)
        assert client.completions.create(**kwargs).choices[0].text == expected
        chunks = client.completions.create(**kwargs, stream=True)
        assert "".join(c.choices[0].text for c in chunks if c.choices) == expected
    assert "rank 0 of 2: pipeline parallel" in server.log()
