"""Clients that hang up mid-stream, for a while: nothing breaks, hangs, keeps running or leaks.

    python -m scripts.reliability_disconnects --clients 16 --seconds 60 [--model PATH] [--json]

Starts `vllm-omni-mlx serve` (the tiny random-weight qwen3 by default) on a free 127.0.0.1
port. `--clients` concurrent clients each open streamed chat completions
(/v1/chat/completions, stream true, `--max-tokens`) one after another for `--seconds`; each
stream reads to its end (`--full-fraction` of them) or hangs up after a random number of
events (0: right after the response headers). Measured:

- errors seen while connected: a non-200, an error event, a broken or truncated stream (no
  `[DONE]`, no finish_reason) of a client that had not hung up yet;
- hung streams: no byte for `--read-timeout` s (keepalives count), or no data event for
  `--stall` s;
- after the last client stops: seconds until the worker reports nothing active or waiting,
  then the worker's (and the gateway's) CPU over `--cpu-window` s from /proc (should be ~0:
  every aborted request really stopped);
- RSS of the gateway and the worker at the start (after one warm-up stream) and the end;
- requests started, completed, hung up on, and the worker's own counters (requests,
  aborts, tokens); the worker must be the same process at the end.

Exits 1 on an error seen while connected, a hung stream, a worker still busy `--idle-timeout`
s after the stop, worker CPU above `--max-worker-cpu` of one core, or a worker restart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shlex
import sys
import time
from dataclasses import asdict, dataclass, field

import httpx

from scripts.reliability_support import (
    MEASURE,
    NO_MEASURE,
    Server,
    cpu_fraction,
    default_model,
    exit_on_sigterm,
    mib,
    rss_bytes,
)

PROMPT = [{"role": "user", "content": "Tell me a long story about a lighthouse keeper."}]


@dataclass
class Tally:
    started: int = 0
    completed: int = 0  # read to [DONE] with a finish_reason
    disconnected: int = 0  # the client hung up on purpose
    errors: int = 0  # seen while still connected
    hangs: int = 0
    events: int = 0  # data events read, all clients
    samples: list[str] = field(default_factory=list)  # the first few errors and hangs

    def note(self, kind: str, text: str) -> None:
        if kind == "hang":
            self.hangs += 1
        else:
            self.errors += 1
        if len(self.samples) < 10:
            self.samples.append(f"{kind}: {text}")


async def one_stream(client: httpx.AsyncClient, url: str, body: dict, args, rng, tally: Tally):
    """One streamed request; `plan` is the number of data events read before hanging up."""
    full = rng.random() < args.full_fraction
    plan = None if full else rng.randint(0, args.max_tokens // 2)
    tally.started += 1
    try:
        async with client.stream("POST", url, json=body) as r:
            if r.status_code != 200:
                tally.note("error", f"HTTP {r.status_code}: {(await r.aread())[:200]!r}")
                return
            if plan == 0:
                tally.disconnected += 1
                return
            events, done, finish, last_data = 0, False, None, time.monotonic()
            async for line in r.aiter_lines():
                now = time.monotonic()
                if not line.startswith("data:"):
                    if now - last_data > args.stall:
                        tally.note("hang", f"no data event for {now - last_data:.1f} s")
                        return
                    continue
                last_data = now
                payload = line[5:].strip()
                if done:
                    tally.note("error", f"data after [DONE]: {payload[:200]}")
                    return
                if payload == "[DONE]":
                    done = True
                    continue
                event = json.loads(payload)
                if "error" in event:
                    tally.note("error", f"error event: {payload[:300]}")
                    return
                for choice in event.get("choices") or []:
                    finish = choice.get("finish_reason") or finish
                events += 1
                tally.events += 1
                if plan is not None and events >= plan and finish is None:
                    tally.disconnected += 1
                    return  # leaving the block closes the connection mid-stream
            if not done or finish is None:
                tally.note(
                    "error", f"stream ended after {events} events, done={done} finish={finish}"
                )
            else:
                tally.completed += 1
    except httpx.ReadTimeout:
        tally.note("hang", f"no byte for {args.read_timeout:g} s")
    except (httpx.HTTPError, ValueError) as exc:
        tally.note("error", f"broken stream: {type(exc).__name__}: {exc}")


async def drive(server: Server, args) -> tuple[Tally, float]:
    tally = Tally()
    url = f"{server.url}/v1/chat/completions"
    body = {"model": server.name, "messages": PROMPT, "max_tokens": args.max_tokens, "stream": True}
    timeout = httpx.Timeout(10.0, read=args.read_timeout)
    limits = httpx.Limits(max_connections=args.clients + 4, max_keepalive_connections=args.clients)
    end = time.monotonic() + args.seconds

    async def client_loop(i: int):
        rng = random.Random(args.seed * 1000 + i)
        while time.monotonic() < end:
            await one_stream(client, url, body, args, rng, tally)

    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
        await asyncio.gather(*(client_loop(i) for i in range(args.clients)))
    return tally, time.monotonic()


def warm_up(server: Server, args) -> None:
    """One full stream first, so lazily built state counts in the starting RSS."""
    body = {"model": server.name, "messages": PROMPT, "max_tokens": args.max_tokens, "stream": True}
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=60) as r:
        r.raise_for_status()
        for _ in r.iter_lines():
            pass
    server.wait_idle()


def run(args) -> dict:
    extra = shlex.split(args.serve_args)
    with Server(args.model, extra, args.log) as server:
        warm_up(server, args)
        worker = int(server.health()[1]["worker_pid"])
        rss_start = {"gateway": rss_bytes(server.pid), "worker": rss_bytes(worker)}
        before = server.stats()

        tally, stopped = asyncio.run(drive(server, args))

        idle_s = server.wait_idle(args.idle_timeout)
        worker_cpu, gateway_cpu = cpu_fraction([worker, server.pid], args.cpu_window)
        rss_end = {"gateway": rss_bytes(server.pid), "worker": rss_bytes(worker)}
        after = server.stats()
        worker_end = server.health()[1].get("worker_pid")

    counters = ("requests_total", "requests_aborted", "tokens_generated")
    result = {
        "model": server.name,
        "clients": args.clients,
        "seconds": args.seconds,
        "max_tokens": args.max_tokens,
        "measure": MEASURE,
        "client": asdict(tally),
        "worker": {k: after[k] - before[k] for k in counters},
        "idle_after_stop_s": idle_s,
        "cpu_after_stop": {
            "worker": worker_cpu,
            "gateway": gateway_cpu,
            "window_s": args.cpu_window,
        },
        "rss_start": rss_start,
        "rss_end": rss_end,
        "worker_pid": {"start": worker, "end": worker_end},
        "log": server.log_path,
    }
    result["violations"] = violations(result, args)
    return result


def violations(r: dict, args) -> list[str]:
    found = []
    if r["client"]["errors"]:
        found.append(f"{r['client']['errors']} error(s) seen by connected clients")
    if r["client"]["hangs"]:
        found.append(f"{r['client']['hangs']} hung stream(s)")
    if r["idle_after_stop_s"] is None:
        found.append(f"worker still busy {args.idle_timeout:g} s after the last client stopped")
    cpu = r["cpu_after_stop"]["worker"]
    if cpu is not None and cpu > args.max_worker_cpu:
        found.append(f"worker CPU after stop {cpu:.1%} of a core > {args.max_worker_cpu:.0%}")
    if r["worker_pid"]["end"] != r["worker_pid"]["start"]:
        found.append(f"worker changed: {r['worker_pid']['start']} -> {r['worker_pid']['end']}")
    return found


def report(r: dict) -> str:
    c, w, cpu = r["client"], r["worker"], r["cpu_after_stop"]
    idle = "never" if r["idle_after_stop_s"] is None else f"{r['idle_after_stop_s']:.2f} s"

    def pct(x):
        return "n/a" if x is None else f"{x:.1%}"

    lines = [
        f"model {r['model']}: {r['clients']} clients x {r['seconds']:g} s, max_tokens {r['max_tokens']}",
        f"requests: started {c['started']}, completed {c['completed']}, hung up {c['disconnected']}, "
        f"errors {c['errors']}, hung {c['hangs']} ({c['events']} data events read)",
        f"worker counters: requests {w['requests_total']}, aborted {w['requests_aborted']}, "
        f"tokens {w['tokens_generated']}",
        f"idle after stop: {idle}; "
        f"CPU over the next {cpu['window_s']:g} s: worker {pct(cpu['worker'])}, gateway {pct(cpu['gateway'])}",
    ]
    for proc in ("gateway", "worker"):
        a, b = r["rss_start"][proc], r["rss_end"][proc]
        growth = "" if a is None or b is None else f" ({(b - a) / 2**20:+.1f} MiB)"
        lines.append(f"RSS {proc}: {mib(a)} -> {mib(b)}{growth}")
    if r["measure"] is None:
        lines.append(f"NOTE: {NO_MEASURE}")
    lines += [f"  {s}" for s in c["samples"]]
    lines.append("FAIL: " + "; ".join(r["violations"]) if r["violations"] else "OK")
    lines.append(f"server log: {r['log']}")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", help="checkpoint directory or hub id [default: the tiny qwen3]")
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--max-tokens", type=int, default=300)
    p.add_argument("--full-fraction", type=float, default=0.25, help="streams read to the end")
    p.add_argument("--read-timeout", type=float, default=10.0, help="no byte this long: a hang")
    p.add_argument("--stall", type=float, default=30.0, help="no data event this long: a hang")
    p.add_argument("--idle-timeout", type=float, default=10.0)
    p.add_argument("--cpu-window", type=float, default=2.0)
    p.add_argument("--max-worker-cpu", type=float, default=0.10, help="share of one core")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--serve-args", default="", help="more `serve` options, one string")
    p.add_argument("--log", help="server log file [default: a temporary file]")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args()
    exit_on_sigterm()
    if MEASURE is None:
        print(f"NOTE: {NO_MEASURE}", file=sys.stderr)
    args.model = args.model or default_model()
    result = run(args)
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
