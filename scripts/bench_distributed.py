"""One rank against two (`serve --ranks 2`) on one machine: what splitting a model costs.

Starts our server twice on the same checkpoint, one after the other (a plain worker, then a
tensor-parallel group of two ranks on loopback with the ring backend) and measures, per side:
single-stream decode tok/s (a non-streamed completion of `--tokens` greedy tokens, minus its
TTFT), TTFT of a `--prompt-tokens` prompt (streamed, first content chunk), and each rank's
resident memory (VmRSS from /proc) after the runs. Prints one JSON object per side and the
ratios (two ranks / one rank).

  python -m scripts.bench_distributed --arch llama --size 20m --runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from scripts.bench_sides import OUR_CLI, ServerSide, free_port, process_tree, side_env

WORDS = "the quick brown fox jumps over a lazy dog while it rains in the city " * 400


def checkpoint(arch: str, size: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "worker.tiny_models", "--arch", arch, "--size", size],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.strip().splitlines()[-1]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def rank_pids(root: int) -> list[int]:
    """The processes under the server that hold a model (the workers / ranks)."""
    found = []
    for pid in process_tree(root):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            b"worker" in cmdline
            and b"-m" in cmdline
            and b"worker.distributed.launcher" not in cmdline
        ):
            found.append(pid)
    return found


def measure(side: ServerSide, model: str, prompt: str, tokens: int, runs: int) -> dict:
    body = {"model": model, "temperature": 0, "max_tokens": tokens, "prompt": "Hello there"}
    httpx.post(side.url + "/v1/completions", json={**body, "max_tokens": 4}, timeout=600)
    decode, ttft = [], []
    for _ in range(runs):
        started = time.perf_counter()
        with httpx.stream(
            "POST", side.url + "/v1/completions",
            json={**body, "prompt": prompt, "max_tokens": 1, "stream": True}, timeout=600,
        ) as r:  # fmt: skip
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    ttft.append(time.perf_counter() - started)
                    break
        started = time.perf_counter()
        reply = httpx.post(side.url + "/v1/completions", json=body, timeout=600).json()
        elapsed = time.perf_counter() - started
        assert reply["usage"]["completion_tokens"] == tokens, reply
        decode.append(tokens / elapsed)
    assert side.proc is not None
    return {
        "side": side.name,
        "decode_tok_s": statistics.median(decode),
        "ttft_s": statistics.median(ttft),
        "rss_mib_per_process": [round(rss_mib(p)) for p in rank_pids(side.proc.pid)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="llama")
    parser.add_argument("--size", default="20m")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--prompt-words", type=int, default=1400)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    path = checkpoint(args.arch, args.size)
    prompt = " ".join(WORDS.split()[: args.prompt_words])
    results = []
    log_dir = Path(tempfile.mkdtemp(prefix="bench-distributed-"))
    for name, extra in (("one rank", []), ("two ranks", ["--ranks", "2"])):
        port = free_port()
        command = [*OUR_CLI, "serve", path, "--port", str(port), "--log-level", "warning", *extra]
        side = ServerSide(name, command, log_dir / f"{len(results)}.log", health_path="/health")
        side.start(side_env("openblas"), port)
        try:
            side.wait_ready()
            results.append(measure(side, Path(path).name, prompt, args.tokens, args.runs))
        finally:
            side.stop()
        print(json.dumps(results[-1]), flush=True)
    one, two = results
    print(json.dumps({
        "decode_two_over_one": round(two["decode_tok_s"] / one["decode_tok_s"], 3),
        "ttft_two_over_one": round(two["ttft_s"] / one["ttft_s"], 3),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
