"""What serving costs per streamed token, part by part: CPU milliseconds per token of our
gateway, our worker and the HTTP client, next to direct mlx-lm on the same checkpoint.

    python -m scripts.profile_token_cost                 # the tiny qwen3: overhead-dominated
    python -m scripts.profile_token_cost --size 20m --tokens 256

On a machine with few cores every part competes with the model's own threads, so the CPU a
token costs outside mlx-lm is what a server gives up against a direct call (see "Why" in
docs/benchmarks.md). The tiny checkpoint makes a decode step cheap, so those fixed costs stand
out. Each round streams `--tokens` tokens through `vllm-omni-mlx serve` with 1 and with 8
concurrent streams (the `vllm-omni-mlx bench` client code, httpx, as SDK users run) and one
`stream_generate` of as many tokens in the direct mlx-lm process (`scripts/bench_direct.py`);
CPU seconds come from /proc (every thread of each process) and the client's from getrusage.
Medians over `--rounds`.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from gateway.cli.bench.client import first_model_id, request_body, stream_request
from scripts.bench_sides import DirectSide, cpu_seconds, free_port, ours, side_env

MESSAGES = [{"role": "user", "content": "Tell me a long story."}]


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _through_server(url: str, gateway: int, worker: int, conc: int, tokens: int) -> dict:
    """One burst of `conc` concurrent streams of tokens/conc tokens each: ms of CPU per token."""
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        model = await first_model_id(client)
        body = request_body("chat", model, MESSAGES, max(1, tokens // conc))
        await stream_request(client, "chat", body)  # warm-up
        before = cpu_seconds([gateway]), cpu_seconds([worker]), _own_cpu()
        start = time.perf_counter()
        results = await asyncio.gather(*(stream_request(client, "chat", body) for _ in range(conc)))
        wall = time.perf_counter() - start
        after = cpu_seconds([gateway]), cpu_seconds([worker]), _own_cpu()
    failed = [r.error for r in results if not r.ok]
    if failed:
        raise RuntimeError(f"a request failed: {failed[0]}")
    n = sum(r.completion_tokens for r in results)
    gateway_s, worker_s, client_s = (b - a for a, b in zip(before, after, strict=True))
    return {
        "tok_s": n / wall,
        "gateway": 1000 * gateway_s / n,
        "worker": 1000 * worker_s / n,
        "client": 1000 * client_s / n,
    }


def _direct(direct: DirectSide, tokens: int) -> dict:
    before = cpu_seconds([direct.mlx_pid])
    result = direct.call("single", messages=MESSAGES, max_tokens=tokens)
    cpu = cpu_seconds([direct.mlx_pid]) - before
    return {"tok_s": result["decode_tok_s"], "worker": 1000 * cpu / result["completion_tokens"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", help="checkpoint directory [default: the qwen3 of --size]")
    p.add_argument("--size", default="tiny", help="worker.tiny_models size [default: tiny]")
    p.add_argument("--tokens", type=int, default=1000, help="tokens per measurement")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--blas", choices=["openblas", "bundled"], default="openblas")
    args = p.parse_args()
    if args.model is None:
        from worker.tiny_models import ensure_checkpoint

        args.model = str(ensure_checkpoint("qwen3", size=args.size))
    env = side_env(args.blas)
    log_dir = Path(tempfile.mkdtemp(prefix="token-cost-"))
    port = free_port()
    server = ours(args.model, port, args.blas, log_dir, max_num_seqs=8)
    server.start(env, port)
    direct = None
    rows: dict[str, list[dict]] = {"direct": [], "ours 1 stream": [], "ours 8 streams": []}
    try:
        server.wait_ready()
        direct = DirectSide(args.model, env, log_dir)
        _direct(direct, 16)  # warm-up
        for round_ in range(args.rounds):
            rows["direct"].append(_direct(direct, args.tokens))
            for conc in (1, 8):
                measured = asyncio.run(
                    _through_server(server.url, server.proc.pid, server.mlx_pid, conc, args.tokens)
                )
                rows[f"ours {conc} stream{'s' if conc > 1 else ''}"].append(measured)
            print(f"round {round_ + 1}/{args.rounds} done", flush=True)
    finally:
        server.stop()
        if direct is not None:
            direct.stop()
    print(f"\n{args.model}: CPU ms per token (median of {args.rounds} rounds)")
    print(f"{'':16s} {'tok/s':>8s} {'worker':>8s} {'gateway':>8s} {'client':>8s} {'all':>8s}")
    for name, measured in rows.items():
        med = {k: statistics.median(m[k] for m in measured) for k in measured[0]}
        parts = [med.get(k) for k in ("worker", "gateway", "client")]
        cells = [f"{v:8.3f}" if v is not None else f"{'-':>8s}" for v in parts]
        total = sum(v for v in parts if v is not None)
        print(f"{name:16s} {med['tok_s']:8.1f} {' '.join(cells)} {total:8.3f}")


if __name__ == "__main__":
    main()
