"""kill -9 of the worker under open streams, again and again: every stream ends, the server heals.

    python -m scripts.reliability_kill_loop --kills 10 --streams 4 [--model PATH] [--json]

Starts `vllm-omni-mlx serve` (the tiny random-weight qwen3 by default) on a free 127.0.0.1
port, with `--restart-backoff-max` (default 2 s here; the server's default is 30 s, and the
backoff doubles per crash within 120 s). Then `--kills` times: opens `--streams` streamed chat
completions, waits until each has produced content, SIGKILLs the worker (its pid from
/health), and checks that every stream ends with an error event, then `data: [DONE]`, then
the end of the body, within `--end-within` s of the kill; waits for /health 200 with a new
worker pid (the old one gone) and sends one short request, which must succeed.

Per kill it reports the seconds from the kill to: the last stream's end, /health 200 again,
the first successful reply; and their median and max. Exits 1 on any violation (a stream
without its error event or [DONE], late, broken, or ended normally before the kill; no new
worker within `--heal-timeout` s; a failed first request).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import signal
import sys
import time

import httpx

from scripts.reliability_support import (
    Server,
    default_model,
    exit_on_sigterm,
    pid_alive,
    summary,
)

PROMPT = [{"role": "user", "content": "Tell me everything."}]


async def watch_stream(client, url: str, body: dict, producing: asyncio.Event, kill: dict) -> dict:
    """Reads one stream to its end: when (relative to the kill) its error event and [DONE]
    came, and what went wrong."""
    out = {"error_at": None, "done_at": None, "end_at": None, "problem": None, "error": None}

    def since_kill() -> float | None:
        return None if kill.get("t") is None else time.monotonic() - kill["t"]

    try:
        async with client.stream("POST", url, json=body) as r:
            if r.status_code != 200:
                out["problem"] = f"HTTP {r.status_code} before the kill"
                return out
            async for line in r.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if out["done_at"] is not None:
                    out["problem"] = f"data after [DONE]: {payload[:200]}"
                elif payload == "[DONE]":
                    out["done_at"] = since_kill()
                elif "error" in (event := json.loads(payload)):
                    out["error_at"], out["error"] = since_kill(), event["error"].get("message")
                    if kill.get("t") is None:
                        out["problem"] = f"error event before the kill: {payload[:200]}"
                elif out["error_at"] is not None:
                    out["problem"] = "output after the error event"
                else:
                    for choice in event.get("choices") or []:
                        if choice.get("finish_reason"):
                            out["problem"] = f"finished ({choice['finish_reason']}) before the kill"
                        if (choice.get("delta") or {}).get("content"):
                            producing.set()
            out["end_at"] = since_kill()
    except (httpx.HTTPError, ValueError) as exc:
        out["problem"] = f"broken stream: {type(exc).__name__}: {exc}"
    finally:
        producing.set()  # never leave the main loop waiting on a stream that is over
    return out


async def open_and_kill(server: Server, pid: int, args) -> tuple[list[dict], float | None]:
    """Opens the streams, kills `pid` once all of them produce; (per-stream results, t_kill)."""
    url = f"{server.url}/v1/chat/completions"
    body = {"model": server.name, "messages": PROMPT, "max_tokens": args.max_tokens, "stream": True}
    kill: dict = {}
    timeout = httpx.Timeout(10.0, read=args.end_within + 10)
    async with httpx.AsyncClient(timeout=timeout) as client:
        ready = [asyncio.Event() for _ in range(args.streams)]
        tasks = [asyncio.create_task(watch_stream(client, url, body, ev, kill)) for ev in ready]
        try:
            await asyncio.wait_for(asyncio.gather(*(ev.wait() for ev in ready)), 60)
        except asyncio.TimeoutError:
            pass  # reported below: the streams that produced nothing have a problem
        kill["t"] = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        results = await asyncio.gather(*tasks)
    for res in results:
        if res["problem"]:
            continue
        if res["error_at"] is None:
            res["problem"] = "no error event after the kill"
        elif res["done_at"] is None:
            res["problem"] = "no [DONE] after the error event"
        elif res["end_at"] > args.end_within:
            res["problem"] = f"ended {res['end_at']:.2f} s after the kill (> {args.end_within:g} s)"
    return results, kill["t"]


def first_request(server: Server) -> tuple[bool, str]:
    body = {"model": server.name, "messages": PROMPT, "max_tokens": 3}
    try:
        r = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=60)
    except httpx.HTTPError as exc:
        return False, f"{type(exc).__name__}: {exc}"
    if r.status_code != 200:
        return False, f"HTTP {r.status_code}: {r.text[:200]}"
    return True, r.json()["choices"][0]["finish_reason"]


def iteration(server: Server, n: int, args) -> dict:
    pid = int(server.wait_healthy(timeout=args.heal_timeout)["worker_pid"])
    streams, t_kill = asyncio.run(open_and_kill(server, pid, args))
    problems = [f"stream {i}: {s['problem']}" for i, s in enumerate(streams) if s["problem"]]
    ends = [s["end_at"] for s in streams if s["end_at"] is not None]
    row = {"kill": n, "old_pid": pid, "streams_ended_s": max(ends) if ends else None}
    row["stream_end_s"] = ends
    row["error_message"] = next((s["error"] for s in streams if s["error"]), None)
    try:
        health = server.wait_healthy(timeout=args.heal_timeout, not_pid=pid)
        row["healthy_s"] = time.monotonic() - t_kill
        row["new_pid"] = health["worker_pid"]
        if pid_alive(pid):
            problems.append(f"old worker {pid} still alive")
        ok, detail = first_request(server)
        row["first_ok_s"] = time.monotonic() - t_kill if ok else None
        if not ok:
            problems.append(f"first request after the restart failed: {detail}")
    except TimeoutError:
        row["healthy_s"] = row["first_ok_s"] = row["new_pid"] = None
        problems.append(f"no new healthy worker within {args.heal_timeout:g} s")
    row["problems"] = problems
    return row


def report(result: dict) -> str:
    def f(x):
        return "-" if x is None else f"{x:.2f}"

    lines = [
        f"model {result['model']}: {result['kills']} kills x {result['streams']} streams, "
        f"restart backoff max {result['restart_backoff_max']:g} s",
        "kill  old pid  new pid  streams ended s  healthy s  first ok s  problems",
    ]
    for r in result["rows"]:
        lines.append(
            f"{r['kill']:>4}  {r['old_pid']:>7}  {r['new_pid'] or '-':>7}  {f(r['streams_ended_s']):>15}"
            f"  {f(r['healthy_s']):>9}  {f(r['first_ok_s']):>10}  {'; '.join(r['problems']) or 'none'}"
        )
    for key, label in (
        ("streams_ended_s", "kill -> all streams ended"),
        ("healthy_s", "kill -> /health 200"),
        ("first_ok_s", "kill -> first reply"),
    ):
        s = result["summary"][key]
        lines.append(f"{label}: median {f(s['median'])} s, max {f(s['max'])} s")
    if result["rows"]:
        lines.append(f"error event text: {result['rows'][0]['error_message']!r}")
    v = result["violations"]
    lines.append(f"FAIL: {len(v)} problem(s)" if v else "OK")
    lines.append(f"server log: {result['log']}")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", help="checkpoint directory or hub id [default: the tiny qwen3]")
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--streams", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=3000, help="long enough to outlive the kill")
    p.add_argument("--end-within", type=float, default=2.0, help="seconds from kill to [DONE]")
    p.add_argument("--heal-timeout", type=float, default=120.0)
    p.add_argument("--restart-backoff-max", type=float, default=2.0)
    p.add_argument("--serve-args", default="", help="more `serve` options, one string")
    p.add_argument("--log", help="server log file [default: a temporary file]")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args()
    exit_on_sigterm()
    args.model = args.model or default_model()
    extra = ["--restart-backoff-max", str(args.restart_backoff_max), *shlex.split(args.serve_args)]

    rows = []
    with Server(args.model, extra, args.log) as server:
        for n in range(1, args.kills + 1):
            rows.append(iteration(server, n, args))
    result = {
        "model": server.name,
        "kills": args.kills,
        "streams": args.streams,
        "restart_backoff_max": args.restart_backoff_max,
        "rows": rows,
        "summary": {
            key: summary([r[key] for r in rows if r[key] is not None])
            for key in ("streams_ended_s", "healthy_s", "first_ok_s")
        },
        "violations": [f"kill {r['kill']}: {p}" for r in rows for p in r["problems"]],
        "log": server.log_path,
    }
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
