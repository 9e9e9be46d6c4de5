"""Prefill at agent sizes: the prefill rate against direct mlx-lm, and what a long prefill does
to a stream decoding beside it.

    python -m scripts.bench_prefill [--size tiny-64k] [--lengths 8000,16000,32000] [--long 30000]
        [--sides ours,ours-unpaced,mlx_lm.server,direct] [--json out.json]

1. Prefill rate: for each of `--lengths`, a fresh prompt of about that many tokens (seeded
   prose, a salt in front so no cache can serve it), `max_tokens` 1, greedy: prompt tokens
   over the time to the answer. `direct` is `stream_generate` in a process of its own
   (scripts/bench_direct.py), chat template included as the servers do.
2. Beside a stream (servers only): a greedy stream (EOS banned with `logit_bias`, so it
   outlasts the test) decodes alone for `--solo-seconds`; then a `--long`-token prompt is sent.
   The stream's inter-token latency, p50 and p99, alone and while that prompt is prefilled,
   and how long its answer took.

Sides: `ours` (the default: prefill paced beside decoding streams, worker/text/prefill_pacing.py),
`ours-unpaced` (`--prefill-interleave 0`: whole prefill_step_size chunks, as mlx-lm's
BatchGenerator does), `mlx_lm.server`, `direct`. They run one after the other, each alone on
the machine, under one BLAS environment (scripts/bench_sides.py).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from scripts.bench_agent_session import WORDS
from scripts.bench_sides import DirectSide, free_port, mlx_lm_server, ours, side_env
from worker.tiny_models import ensure_checkpoint

TOKENS_PER_WORD = 1.28  # the tiny checkpoints' BPE on this prose (32,000 asked: 28,637 tokens)
STREAM_TOKENS = 256  # tokens of each request of the decoding stream


def prose(seed: int, tokens: int) -> str:
    rng = random.Random(seed)
    words = [rng.choice(WORDS) for _ in range(int(tokens / TOKENS_PER_WORD))]
    return f"[{seed}] " + " ".join(words)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def eos_ids(path: str) -> list[int]:
    config = json.loads((Path(path) / "config.json").read_text())
    generation = Path(path) / "generation_config.json"
    ids = config.get("eos_token_id")
    if generation.exists():
        ids = json.loads(generation.read_text()).get("eos_token_id", ids)
    return ids if isinstance(ids, list) else [ids]


def answer(client: httpx.Client, model: str, text: str) -> dict:
    start = time.perf_counter()
    response = client.post(
        "/v1/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": text}],
              "max_tokens": 1, "temperature": 0},
    )  # fmt: skip
    response.raise_for_status()
    usage = response.json().get("usage") or {}
    return {"seconds": time.perf_counter() - start, "prompt_tokens": usage.get("prompt_tokens")}


class Stream(threading.Thread):
    """Greedy streams one after another until `stop` (EOS banned, `STREAM_TOKENS` each, so
    the stream's own context, and with it its decode step, stays the same size throughout);
    `times` holds each one's token arrival times (every chunk that carries a token: content,
    reasoning or a tool call)."""

    def __init__(self, url: str, model: str, bias: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.times: list[list[float]] = []
        self.stop = threading.Event()
        self._url = url
        self._body = {"model": model, "messages": [{"role": "user", "content": "Count on."}],
                      "max_tokens": STREAM_TOKENS, "temperature": 0, "stream": True,
                      "logit_bias": bias}  # fmt: skip
        self.error: str | None = None

    def run(self) -> None:
        try:
            with httpx.Client(base_url=self._url, timeout=None) as client:
                while not self.stop.is_set():
                    self.times.append([])
                    self._one(client, self.times[-1])
        except httpx.HTTPError as exc:
            self.error = repr(exc)

    def _one(self, client: httpx.Client, times: list[float]) -> None:
        with client.stream("POST", "/v1/chat/completions", json=self._body) as response:
            for line in response.iter_lines():
                if self.stop.is_set():
                    return
                if line.startswith("data: {") and _carries_a_token(json.loads(line[6:])):
                    times.append(time.perf_counter())


def _carries_a_token(chunk: dict) -> bool:
    delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
    return any(delta.get(k) for k in ("content", "reasoning_content", "reasoning", "tool_calls"))


def gaps(streams: list[list[float]], start: float, end: float) -> list[tuple[float, float]]:
    """(gap, when it began) between consecutive tokens of one stream, inside [start, end]."""
    return [(b - a, a) for times in streams for a, b in zip(times, times[1:], strict=False)
            if a >= start and b <= end]  # fmt: skip


def beside_a_stream(side: Any, path: str, long_tokens: int, solo_s: float, seed: int) -> dict:
    bias = {str(t): -100 for t in eos_ids(path)}
    stream = Stream(side.url, side.model, bias)
    stream.start()
    while sum(len(t) for t in stream.times) < 5:
        if stream.error or not stream.is_alive():
            raise RuntimeError(f"{side.name}: the stream failed: {stream.error}")
        time.sleep(0.05)
    solo_from = time.perf_counter()
    time.sleep(solo_s)
    sent = time.perf_counter()
    with httpx.Client(base_url=side.url, timeout=None) as client:
        long = answer(client, side.model, prose(seed, long_tokens))
    done = time.perf_counter()
    stream.stop.set()
    stream.join(timeout=30)
    solo = [g for g, _ in gaps(stream.times, solo_from, sent)]
    timed = gaps(stream.times, sent, done)
    during = [g for g, _ in timed]
    worst = max(timed, default=None)
    return {
        "long_prompt_tokens": long["prompt_tokens"],
        "long_answer_s": long["seconds"],
        "solo_itl_p50_ms": 1000 * statistics.median(solo),
        "solo_itl_p99_ms": 1000 * percentile(solo, 0.99),
        "during_itl_p50_ms": 1000 * statistics.median(during) if during else None,
        "during_itl_p99_ms": 1000 * percentile(during, 0.99) if during else None,
        "during_max_ms": 1000 * max(during) if during else None,
        "tokens_during": len(during),
        # where the longest gap during the prefill began, in seconds after the prompt was sent
        "worst_gap_at_s": worst[1] - sent if worst else None,
    }


def start(name: str, path: str, env: dict, logs: Path, blas: str) -> Any:
    if name == "direct":
        return DirectSide(path, env, logs)
    port = free_port()
    if name == "mlx_lm.server":
        side = mlx_lm_server(path, port, logs)
    else:
        side = ours(path, port, blas, logs, 8)
        if name == "ours-unpaced":
            side.name, side.command = name, [*side.command, "--prefill-interleave", "0"]
        side.command += ["--prefix-cache-bytes", "0"]  # every prompt is fresh anyway
    side.start(env, port)
    side.wait_ready()
    if side.model == "auto":  # the id the server lists
        side.model = httpx.get(side.url + "/v1/models").json()["data"][0]["id"]
    return side


def run_side(name: str, side: Any, args: argparse.Namespace, path: str) -> dict:
    rates = []
    for i, length in enumerate(args.lengths):
        text = prose(args.seed * 1000 + i, length)
        if name == "direct":
            result = side.call("single", messages=[{"role": "user", "content": text}], max_tokens=1)
            seconds, tokens = result["ttft_s"], result["prompt_tokens"]
        else:
            with httpx.Client(base_url=side.url, timeout=None) as client:
                result = answer(client, side.model, text)
            seconds, tokens = result["seconds"], result["prompt_tokens"]
        rates.append({"prompt_tokens": tokens, "seconds": seconds, "tok_s": tokens / seconds})
        print(f"{name}: {tokens} tokens in {seconds:.2f} s", flush=True)
    out: dict = {"prefill": rates}
    if name != "direct" and args.long:
        out["beside"] = beside_a_stream(side, path, args.long, args.solo_seconds, args.seed + 7)
        print(f"{name}: {out['beside']}", flush=True)
    return out


def report(results: dict) -> None:
    sides = list(results)
    print("\n| prompt tokens | " + " | ".join(f"{s} tok/s" for s in sides) + " |")
    print("| --- |" + " --- |" * len(sides))
    for k, row in enumerate(results[sides[0]]["prefill"]):
        cells = [f"{results[s]['prefill'][k]['tok_s']:.0f}" for s in sides]
        print(f"| {row['prompt_tokens']} | " + " | ".join(cells) + " |")
    if "direct" in results:
        for s in sides:
            if s != "direct":
                ratios = [r["tok_s"] / d["tok_s"] for r, d in
                          zip(results[s]["prefill"], results["direct"]["prefill"], strict=True)]  # fmt: skip
                print(f"{s} / direct prefill rate: " + ", ".join(f"{x:.3f}" for x in ratios))
    beside = [s for s in sides if "beside" in results[s]]
    if beside:
        print("\n| side | long prompt | its answer (s) | ITL alone p50 / p99 (ms) "
              "| ITL during its prefill p50 / p99 / max (ms) | p99 during / alone |")  # fmt: skip
        print("| --- | --- | --- | --- | --- | --- |")
        for s in beside:
            b = results[s]["beside"]
            ratio = b["during_itl_p99_ms"] / b["solo_itl_p99_ms"] if b["during_itl_p99_ms"] else 0
            print(f"| {s} | {b['long_prompt_tokens']} | {b['long_answer_s']:.1f} | "
                  f"{b['solo_itl_p50_ms']:.1f} / {b['solo_itl_p99_ms']:.1f} | "
                  f"{b['during_itl_p50_ms']:.1f} / {b['during_itl_p99_ms']:.1f} / "
                  f"{b['during_max_ms']:.0f} | {ratio:.2f}x |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="a checkpoint directory [--arch/--size]")
    parser.add_argument("--arch", default="qwen3")
    parser.add_argument("--size", default="tiny-64k")
    parser.add_argument("--lengths", default="8000,16000,32000")
    parser.add_argument("--long", type=int, default=30000, help="0: skip part 2")
    parser.add_argument("--solo-seconds", type=float, default=5.0)
    parser.add_argument("--sides", default="ours,ours-unpaced,mlx_lm.server,direct")
    parser.add_argument("--blas", default="openblas", choices=["openblas", "bundled"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    args.lengths = [int(n) for n in args.lengths.split(",") if n]
    path = args.model or str(ensure_checkpoint(args.arch, args.size))
    env = side_env(args.blas)
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sides.split(","):
            side = start(name, path, env, Path(tmp), args.blas)
            try:
                results[name] = run_side(name, side, args, path)
            finally:
                side.stop()
            if args.json:
                Path(args.json).write_text(json.dumps(results, indent=1))
    print(f"\n{Path(path).name}, BLAS {args.blas}")
    report(results)


if __name__ == "__main__":
    main()
