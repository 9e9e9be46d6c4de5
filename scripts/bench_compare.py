"""Our server against direct mlx-lm, mlx_lm.server and vllm-mlx: side by side, in one run.

    python -m scripts.bench_compare --rounds 5 --json /tmp/bench-compare.json

One checkpoint (the 20M-parameter float32 qwen3 the project builds, unless --model), one
BLAS for every side (OpenBLAS preloaded unless --blas bundled), and three scenarios:

- single: one stream, a ~512-token prompt, 128 tokens: TTFT and decode tok/s; the direct side
  is `stream_generate`.
- batch: 8 concurrent streams of 128 tokens: aggregate output tok/s; direct is one
  `BatchGenerator` with a batch of 8.
- turns: a ~2,000-token cold turn, then turn 2 (the history, the reply, a short new message):
  TTFT of each; direct reuses turn 1's KV cache (the best a prefix cache can do).

This machine is small and shared, so absolute numbers drift: each round runs every scenario
on every side back to back (the order rotating each round), and ratios are taken within a
round, then the median over rounds is reported. Servers are measured with the `vllm-omni-mlx
bench` client code (gateway/bench) over HTTP streaming, the same for every server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from gateway.cli.bench.client import first_model_id
from gateway.cli.bench.runner import BenchConfig, BenchSession, open_client
from scripts.bench_sides import (
    DirectSide,
    ServerSide,
    blas_of,
    cpu_seconds,
    free_port,
    mlx_lm_server,
    ours,
    process_tree,
    side_env,
    vllm_mlx,
)

TARGETS = [
    # (name, scenario, metric, numerator side, denominator side, "ge"/"le"/None, bound);
    # None: no target, printed for context.
    ("single decode tok/s vs stream_generate", "single", "decode_tok_s", "ours", "direct", "ge", 0.97),
    ("single TTFT vs stream_generate", "single", "ttft_s", "ours", "direct", "le", 1.10),
    ("batch aggregate tok/s vs BatchGenerator", "batch", "aggregate_tok_s", "ours", "direct", "ge", 0.90),
    ("batch aggregate tok/s vs mlx_lm.server", "batch", "aggregate_tok_s", "ours", "mlx_lm.server", "ge", 1.25),
    ("batch aggregate tok/s vs vllm-mlx", "batch", "aggregate_tok_s", "ours", "vllm-mlx", None, None),
    ("single CPU seconds vs stream_generate", "single", "cpu_s", "ours", "direct", None, None),
    ("batch CPU seconds vs BatchGenerator", "batch", "cpu_s", "ours", "direct", None, None),
    ("mlx_lm.server single decode vs stream_generate", "single", "decode_tok_s", "mlx_lm.server", "direct", None, None),
    ("mlx_lm.server batch vs BatchGenerator", "batch", "aggregate_tok_s", "mlx_lm.server", "direct", None, None),
    ("vllm-mlx single decode vs stream_generate", "single", "decode_tok_s", "vllm-mlx", "direct", None, None),
    ("vllm-mlx batch vs BatchGenerator", "batch", "aggregate_tok_s", "vllm-mlx", "direct", None, None),
]  # fmt: skip


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", help="checkpoint directory [default: the 20m qwen3 tiny checkpoint]")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--blas", choices=["openblas", "bundled"], default="openblas")
    p.add_argument("--openblas-threads", type=int, help="OPENBLAS_NUM_THREADS for every side")
    p.add_argument("--sides", default="ours,direct,mlx_lm.server,vllm-mlx")
    p.add_argument("--scenarios", default="single,batch,turns")
    p.add_argument("--vllm-mlx", default="/tmp/vllm-mlx-venv/bin/vllm-mlx", help="its CLI")
    p.add_argument("--single-prompt", type=int, default=512)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--batch-prompt", type=int, default=128)
    p.add_argument("--history", type=int, default=2000)
    p.add_argument("--follow-up", type=int, default=32)
    p.add_argument("--turn-max-tokens", type=int, default=16)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--json", help="write every measurement and ratio here")
    return p.parse_args()


class Comparison:
    def __init__(
        self, args: argparse.Namespace, servers: list[ServerSide], direct: DirectSide | None
    ):
        self.args = args
        self.servers = servers
        self.direct = direct
        base = BenchConfig(warmup=0, seed=args.seed, max_tokens=args.max_tokens)
        self.configs = {
            "single": replace(base, prompt_tokens=args.single_prompt),
            "batch": replace(base, prompt_tokens=args.batch_prompt, concurrency=(args.batch,)),
            "turns": replace(
                base, turns=2, history_tokens=args.history, prompt_tokens=args.follow_up,
                max_tokens=args.turn_max_tokens,
            ),
        }  # fmt: skip
        self.sessions: dict[tuple[str, str], BenchSession] = {}

    async def open(self, stack: list[Any]) -> None:
        """A session per (server, scenario), all with the prompt calibration measured on ours."""
        calibration = None
        for server in self.servers:
            client = open_client(server.url, None, 600.0, self.args.batch + 1)
            stack.append(client)
            model = server.model
            if model == "auto":
                model = await first_model_id(client)
            for scenario, config in self.configs.items():
                session = BenchSession(client, config, self.args.seed)
                session.model = model
                if calibration is None:
                    await session.prepare()
                    calibration = session.calibration
                session.calibration = calibration
                self.sessions[server.name, scenario] = session
        self.calibration = calibration

    def messages(self, scenario: str, key: str) -> list[dict[str, str]]:
        """Turn 1 of conversation `key`, exactly as the servers are sent it."""
        plan = self.sessions[self.servers[0].name, scenario].plan
        return [{"role": "user", "content": plan.user_text(key, 1)}]

    async def run_server(
        self, server: ServerSide, scenario: str, label: str, max_tokens: int
    ) -> dict:
        session = self.sessions[server.name, scenario]
        session.config = replace(session.config, max_tokens=max_tokens)
        config = session.config
        concurrency = config.concurrency[0]
        level = await session.level(concurrency, concurrency, label, lambda: None)
        results = [r.result for r in level.records]
        errors = [r.error for r in results if not r.ok]
        if errors:
            raise RuntimeError(f"{server.name} {scenario}: {errors[0]}")
        if scenario == "single":
            return {"ttft_s": results[0].ttft, "decode_tok_s": results[0].decode_tok_s}
        if scenario == "batch":
            output = sum(r.completion_tokens for r in results)
            return {"aggregate_tok_s": output / level.duration, "duration_s": level.duration}
        by_turn = {r.turn: r.result for r in level.records}
        return {"cold_ttft_s": by_turn[1].ttft, "warm_ttft_s": by_turn[2].ttft}

    def run_direct(self, scenario: str, label: str, max_tokens: int) -> dict:
        if scenario == "single":
            out = self.direct.call(
                "single", messages=self.messages(scenario, f"{label}/0"), max_tokens=max_tokens
            )
            return {"ttft_s": out["ttft_s"], "decode_tok_s": out["decode_tok_s"]}
        if scenario == "batch":
            conversations = [
                self.messages(scenario, f"{label}/{i}") for i in range(self.args.batch)
            ]
            out = self.direct.call("batch", conversations=conversations, max_tokens=max_tokens)
            return {"aggregate_tok_s": out["aggregate_tok_s"], "duration_s": out["duration_s"]}
        key = f"{label}/0"
        plan = self.sessions[self.servers[0].name, scenario].plan
        out = self.direct.call(
            "turns", messages=self.messages(scenario, key), follow_up=plan.user_text(key, 2),
            max_tokens=max_tokens,
        )  # fmt: skip
        return {"cold_ttft_s": out["cold_ttft_s"], "warm_ttft_s": out["warm_ttft_s"]}

    async def measure(self, side: str, scenario: str, label: str, max_tokens: int) -> dict:
        """One scenario on one side, with the CPU time the side's processes used for it."""
        if side == "direct":
            pids = [self.direct.proc.pid]
            before = cpu_seconds(pids)
            result = self.run_direct(scenario, label, max_tokens)
        else:
            server = next(s for s in self.servers if s.name == side)
            pids = process_tree(server.proc.pid)
            before = cpu_seconds(pids)
            result = await self.run_server(server, scenario, label, max_tokens)
        return {**result, "cpu_s": cpu_seconds(pids) - before}


async def measure_or_fail(
    comparison: Comparison, failed: dict, side: str, scenario: str, label: str, max_tokens: int
) -> dict | None:
    """One measurement, or None once the side has failed this scenario: a server that cannot
    take the load (mlx_lm.server drops some of 32 concurrent streams here: ReadError) is
    reported as failed there, and the other sides are still measured."""
    if (side, scenario) in failed:
        return None
    try:
        return await comparison.measure(side, scenario, f"{label}/{scenario}", max_tokens)
    except Exception as error:  # noqa: BLE001 - any failure of that side is its result
        failed[side, scenario] = f"{type(error).__name__}: {error}"
        print(f"  {side} {scenario} failed: {failed[side, scenario]}", flush=True)
        return None


def max_tokens_of(args: argparse.Namespace, scenario: str) -> int:
    return args.turn_max_tokens if scenario == "turns" else args.max_tokens


async def compare(
    args: argparse.Namespace, servers: list[ServerSide], direct: DirectSide | None
) -> dict:
    comparison = Comparison(args, servers, direct)
    clients: list[Any] = []
    await comparison.open(clients)
    sides = [s.name for s in servers] + (["direct"] if direct else [])
    scenarios = args.scenarios.split(",")
    data: dict[str, Any] = {s: {side: [] for side in sides} for s in scenarios}
    loads = []
    failed: dict[tuple[str, str], str] = {}
    try:
        for side in sides:  # warm-up: first-call costs stay out of the numbers
            for scenario in scenarios:
                await measure_or_fail(comparison, failed, side, scenario, "warm", 4)
        for round_ in range(args.rounds):
            order = sides[round_ % len(sides) :] + sides[: round_ % len(sides)]
            for scenario in scenarios:
                for side in order:
                    label = f"r{round_}"
                    result = await measure_or_fail(
                        comparison, failed, side, scenario, label, max_tokens_of(args, scenario)
                    )
                    if result is not None:
                        data[scenario][side].append(result)
                        print(f"  round {round_ + 1} {scenario} {side}: {result}", flush=True)
            loads.append(os.getloadavg()[0])
            print(
                f"round {round_ + 1}/{args.rounds} done (load average {loads[-1]:.2f})", flush=True
            )
    finally:
        for client in clients:
            await client.aclose()
    for side, scenario in failed:  # a side that failed once has no comparable rounds
        data[scenario][side] = []
    calibration = comparison.calibration
    return {
        "data": data,
        "failed": {f"{side} {scenario}": error for (side, scenario), error in failed.items()},
        "load_average": loads,
        "calibration": vars(calibration) if calibration else None,
    }


def paired_ratios(rows_a: list[dict], rows_b: list[dict], metric: str) -> list[float]:
    """a / b within each round (both measured minutes apart under the same load)."""
    pairs = zip(rows_a, rows_b, strict=True)
    return [a[metric] / b[metric] for a, b in pairs if a[metric] and b[metric]]


def ratio_entry(name: str, ratios: list[float], kind: str | None, bound: float | None) -> dict:
    entry: dict[str, Any] = {"target": name, "ratio": None, "low": None, "high": None}
    if ratios:
        entry.update(ratio=statistics.median(ratios), low=min(ratios), high=max(ratios))
    if kind is not None:
        entry["bound"] = f"{'>=' if kind == 'ge' else '<='} {bound}"
        ratio = entry["ratio"]
        entry["met"] = ratio is not None and (ratio >= bound if kind == "ge" else ratio <= bound)
    return entry


def summarize(result: dict) -> dict:
    """Medians per side and metric; ratios as the median (and range) of per-round ratios."""
    data = result["data"]
    medians = {
        scenario: {side: {m: statistics.median(r[m] for r in rows) for m in rows[0]} for side, rows in sides.items() if rows}
        for scenario, sides in data.items()
    }  # fmt: skip
    targets = []
    for name, scenario, metric, a, b, kind, bound in TARGETS:
        if data.get(scenario, {}).get(a) and data[scenario].get(b):
            ratios = paired_ratios(data[scenario][a], data[scenario][b], metric)
            targets.append(ratio_entry(name, ratios, kind, bound))
    for side, rows in data.get("turns", {}).items():
        speedups = [r["cold_ttft_s"] / r["warm_ttft_s"] for r in rows]
        kind, bound = ("ge", 8.0) if side == "ours" else (None, None)
        targets.append(ratio_entry(f"turn-2 TTFT speed-up ({side})", speedups, kind, bound))
    return {"medians": medians, "targets": targets, "failed": result.get("failed", {})}


def print_summary(summary: dict) -> None:
    for scenario, sides in summary["medians"].items():
        print(f"\n{scenario} (median over rounds)")
        for side, metrics in sides.items():
            print(f"  {side:14s} " + "  ".join(f"{m} {v:.4g}" for m, v in metrics.items()))
    for name, error in summary.get("failed", {}).items():
        print(f"\n{name}: FAILED ({error})")
    print("\nratios: median of per-round ratios [lowest - highest round]")
    for t in summary["targets"]:
        if t["ratio"] is None:
            continue
        verdict = f"target {t['bound']:8s} {'met' if t['met'] else 'MISSED'}" if "met" in t else ""
        spread = f"[{t['low']:.2f} - {t['high']:.2f}]"
        print(f"  {t['target']:48s} {t['ratio']:7.3f} {spread:15s} {verdict}")


def main() -> None:
    args = parse_args()
    if args.model is None:
        from worker.tiny_models import ensure_checkpoint

        args.model = str(ensure_checkpoint("qwen3", size="20m"))
    env = side_env(args.blas, args.openblas_threads)
    log_dir = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    wanted = args.sides.split(",")
    servers: list[ServerSide] = []
    if "ours" in wanted:
        servers.append(ours(args.model, free_port(), args.blas, log_dir, max(8, args.batch)))
    if "mlx_lm.server" in wanted:
        servers.append(mlx_lm_server(args.model, free_port(), log_dir))
    skipped = {}
    if "vllm-mlx" in wanted:
        if shutil.which(args.vllm_mlx) or os.path.exists(args.vllm_mlx):
            servers.append(vllm_mlx(args.vllm_mlx, args.model, free_port(), log_dir))
        else:
            skipped["vllm-mlx"] = f"{args.vllm_mlx} not found"
    direct = None
    try:
        for server in servers:
            server.start(env, int(server.command[server.command.index("--port") + 1]))
        for server in servers:
            server.wait_ready()
        direct = DirectSide(args.model, env, log_dir) if "direct" in wanted else None
        blas = {s.name: blas_of(s.mlx_pid) for s in servers}
        if direct:
            blas["direct"] = blas_of(direct.mlx_pid)
        print(f"checkpoint {args.model}; BLAS per side: {blas}; logs in {log_dir}", flush=True)
        started = time.time()
        result = asyncio.run(compare(args, servers, direct))
    finally:
        if direct:
            direct.stop()
        for server in servers:
            server.stop()
    summary = summarize(result)
    print_summary(summary)
    if args.json:
        machine = {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        }
        record = {
            "args": vars(args),
            "machine": machine,
            "blas": blas,
            "skipped": skipped,
            "started": started,
            **result,
            **summary,
        }
        Path(args.json).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
