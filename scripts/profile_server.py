"""Where the time goes in our server under load: CPU seconds per process and py-spy stacks.

    python -m scripts.profile_server --concurrency 8 --requests 16 --seconds 30

Starts `vllm-omni-mlx serve` on the 20M checkpoint (OpenBLAS preloaded unless --blas bundled),
drives it with the `vllm-omni-mlx bench` client while `py-spy record` samples the gateway and
the worker (`pip install py-spy`), then prints, per process, the CPU seconds it used (from
/proc, so native MLX/BLAS threads count too) and the Python functions with the most samples,
by own time and including callees. Raw collapsed stacks are kept in --out for flame graphs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from gateway.cli.bench.report import table
from gateway.cli.bench.runner import BenchConfig, run_bench
from scripts.bench_sides import TICKS, cpu_seconds, free_port, ours, side_env


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds so far of each thread of `pid`, by thread id."""
    seconds = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            seconds[int(task.name)] = cpu_seconds_of_stat(task / "stat")
        except OSError:
            pass
    return seconds


def cpu_seconds_of_stat(stat: Path) -> float:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def thread_names(collapsed: Path) -> dict[int, str]:
    """Python thread names by native thread id, from py-spy's `thread (TID): NAME` frames."""
    names = {}
    for match in re.finditer(r"^thread \((\d+)\): ([^;]+);", collapsed.read_text(), re.M):
        names[int(match.group(1))] = match.group(2)
    return names


def top_functions(collapsed: Path, limit: int) -> tuple[list, list, int]:
    """(own-time top, inclusive top, total samples) from py-spy's raw collapsed stacks."""
    own, inclusive, total = Counter(), Counter(), 0
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        n = int(count)
        total += n
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    return own.most_common(limit), inclusive.most_common(limit), total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", help="checkpoint [default: the 20m qwen3 tiny checkpoint]")
    p.add_argument("--blas", choices=["openblas", "bundled"], default="openblas")
    p.add_argument("--openblas-threads", type=int, help="OPENBLAS_NUM_THREADS of the worker")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--requests", type=int, default=16)
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--seconds", type=int, default=30, help="py-spy recording length")
    p.add_argument("--native", action="store_true", help="py-spy --native (C frames too)")
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--out", default="/tmp/profile-server")
    args = p.parse_args()
    if args.model is None:
        from worker.tiny_models import ensure_checkpoint

        args.model = str(ensure_checkpoint("qwen3", size="20m"))
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = ours(args.model, port, args.blas, out, args.concurrency)
    server.start(side_env(args.blas, args.openblas_threads), port)
    recorders = []
    try:
        server.wait_ready()
        pids = {"gateway": server.proc.pid, "worker": server.mlx_pid}
        config = BenchConfig(
            url=server.url, prompt_tokens=args.prompt_tokens, max_tokens=args.max_tokens,
            concurrency=(args.concurrency,), requests=args.requests, seed=1, warmup=0,
        )  # fmt: skip
        # First-call costs before the recording; the measured run then adds only its two
        # one-token calibration requests to the CPU counts.
        asyncio.run(run_bench(replace(config, concurrency=(1,), requests=1, max_tokens=8)))
        for name, pid in pids.items():
            command = [py_spy, "record", "-p", str(pid), "-d", str(args.seconds), "-r", "100"]
            command += ["--format", "raw", "--threads", "-o", str(out / f"{name}.txt")]
            command += ["--native"] if args.native else []
            recorders.append(
                subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
        before = {name: cpu_seconds([pid]) for name, pid in pids.items()}
        threads_before = {name: thread_cpu(pid) for name, pid in pids.items()}
        client_before = os.times()
        report = asyncio.run(run_bench(config))
        client_cpu = sum(os.times()[:2]) - sum(client_before[:2])
        after = {name: cpu_seconds([pid]) for name, pid in pids.items()}
        threads_after = {name: thread_cpu(pid) for name, pid in pids.items()}
        for recorder in recorders:
            recorder.wait()
    finally:
        for recorder in recorders:
            if recorder.poll() is None:
                recorder.kill()
        server.stop()
    print(table(report))
    duration = report.levels[0].duration
    tokens = sum(r.result.completion_tokens for r in report.levels[0].records)
    print(f"\nCPU seconds during the run ({duration:.1f} s wall, {tokens} tokens):")
    for name in pids:
        used = after[name] - before[name]
        print(
            f"  {name:8s} {used:7.2f} s  ({used / duration:.2f} cores, {1000 * used / tokens:.2f} ms/token)"
        )
    print(f"  {'client':8s} {client_cpu:7.2f} s  ({client_cpu / duration:.2f} cores)")
    for name in pids:
        names = thread_names(out / f"{name}.txt")
        after_, before_ = threads_after[name], threads_before[name]
        used = sorted(((after_[t] - before_.get(t, 0.0), t) for t in after_), reverse=True)
        print(f"\n{name} threads by CPU seconds (unnamed: native MLX / BLAS threads):")
        for seconds, tid in used[:8]:
            print(f"  {seconds:7.2f} s  {tid}  {names.get(tid, '(native)')}")
    for name in pids:
        own, inclusive, total = top_functions(out / f"{name}.txt", args.top)
        print(f"\n{name}: {total} samples; most own time")
        for frame, n in own:
            print(f"  {100 * n / total:5.1f}%  {frame}")
        print(f"{name}: most time including callees")
        for frame, n in inclusive:
            print(f"  {100 * n / total:5.1f}%  {frame}")


if __name__ == "__main__":
    main()
