"""Images in chat at batch scale: eight image requests at once, decoded together or one by one.

    python -m scripts.bench_vision_batch --baseline REV [--rounds 3] [--requests 8]
        [--tokens 64] [--image-size 224] [--model DIR] [--json out.json]

Two servers on the same checkpoint (the tiny Qwen2-VL at size `bench` unless --model), OpenBLAS
preloaded into each worker, no caches (`--vision-cache-entries 0 --prefix-cache-bytes 0`):
- "batched": this checkout, where image requests decode together in the worker's batch
  (worker/vision/batched.py);
- "baseline": the code at git revision REV, from a worktree of this repository (PYTHONPATH
  set to it, so the gateway and its worker import that code): before the batch, each image
  request ran its own mlx-vlm generator, interleaved round robin, batch-1.
Each round sends `--requests` image chats at once (a different noise picture each, greedy,
`max_tokens` `--tokens`, not streamed) to each server in turn (the order alternating), and
takes the wall time from the first send to the last reply: aggregate tokens/s = the replies'
completion tokens / that time. The replies of the two servers must be equal (the same greedy
output); the ratio batched / baseline is taken within each round, its median reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from scripts.bench_sides import ServerSide, free_port, ours, side_env
from scripts.bench_vision import picture
from worker.tiny_models import ensure_checkpoint

NO_CACHES = ["--vision-cache-entries", "0", "--prefix-cache-bytes", "0"]
REPO = Path(__file__).resolve().parent.parent


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--baseline", required=True, help="git revision of the baseline server")
    p.add_argument("--model", help="checkpoint directory [default: qwen2_vl at size bench]")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--requests", type=int, default=8, help="image requests sent at once")
    p.add_argument("--tokens", type=int, default=64, help="max_tokens of each")
    p.add_argument("--image-size", type=int, default=224, help="square image side, pixels")
    p.add_argument("--json", help="write every measurement here")
    return p.parse_args()


def burst(url: str, pictures: list[str], tokens: int) -> tuple[float, list[str], int]:
    """All the requests at once: (wall seconds, the replies' texts, completion tokens)."""

    def ask(client: httpx.Client, image: str) -> dict:
        content = [{"type": "text", "text": "Describe this picture."},
                   {"type": "image_url", "image_url": {"url": image}}]  # fmt: skip
        body = {"model": model, "messages": [{"role": "user", "content": content}],
                "max_tokens": tokens, "temperature": 0}  # fmt: skip
        response = client.post("/v1/chat/completions", json=body)
        response.raise_for_status()
        return response.json()

    with httpx.Client(base_url=url, timeout=1200) as client:
        model = client.get("/v1/models").json()["data"][0]["id"]
        with ThreadPoolExecutor(len(pictures)) as pool:
            started = time.perf_counter()
            replies = list(pool.map(lambda image: ask(client, image), pictures))
            elapsed = time.perf_counter() - started
    texts = [r["choices"][0]["message"]["content"] for r in replies]
    return elapsed, texts, sum(r["usage"]["completion_tokens"] for r in replies)


def start(model: str, log_dir: Path, name: str, pythonpath: Path, requests: int) -> ServerSide:
    env = {**side_env("openblas"), "PYTHONPATH": str(pythonpath)}
    side = ours(model, free_port(), "openblas", log_dir, requests)
    side.name, side.log_path = name, log_dir / f"{name}.log"
    side.command += NO_CACHES
    side.start(env, int(side.command[side.command.index("--port") + 1]))
    return side


def main() -> None:
    args = parse_args()
    model = args.model or str(ensure_checkpoint("qwen2_vl", "bench"))
    log_dir = Path(tempfile.mkdtemp(prefix="bench-vision-batch-"))
    worktree = log_dir / "baseline"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(worktree), args.baseline],
        check=True, capture_output=True,
    )  # fmt: skip
    sides = {
        "batched": start(model, log_dir, "batched", REPO, args.requests),
        "baseline": start(model, log_dir, "baseline", worktree, args.requests),
    }
    rows: list[dict] = []
    try:
        for side in sides.values():
            side.wait_ready()
            burst(side.url, [picture(10_000, args.image_size)], 4)  # warm-up
        names = list(sides)
        for r in range(args.rounds):
            pictures = [picture(r * 100 + i, args.image_size) for i in range(args.requests)]
            row: dict = {"round": r}
            texts = {}
            for name in names[r % 2 :] + names[: r % 2]:
                elapsed, texts[name], tokens = burst(sides[name].url, pictures, args.tokens)
                row[f"{name}_s"], row[f"{name}_tokens"] = elapsed, tokens
                row[f"{name}_tok_s"] = tokens / elapsed
            row["equal"] = texts["batched"] == texts["baseline"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        for side in sides.values():
            side.stop()
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(worktree)],
            check=False, capture_output=True,
        )  # fmt: skip
    report(rows, model, args)
    if args.json:
        Path(args.json).write_text(json.dumps({"model": model, "rounds": rows}, indent=2))
    if not all(row["equal"] for row in rows):
        raise SystemExit("the two servers' replies differ: the comparison is void")


def report(rows: list[dict], model: str, args: argparse.Namespace) -> None:
    ratios = sorted(row["batched_tok_s"] / row["baseline_tok_s"] for row in rows)
    print(
        f"\ncheckpoint {model}; {args.requests} image requests at once, "
        f"{args.image_size}x{args.image_size}, max_tokens {args.tokens}; {len(rows)} rounds"
    )
    print("| server | wall (s) | aggregate tok/s |")
    print("| --- | ---: | ---: |")
    for name in ("baseline", "batched"):
        wall = statistics.median(row[f"{name}_s"] for row in rows)
        rate = statistics.median(row[f"{name}_tok_s"] for row in rows)
        print(f"| {name} | {wall:.2f} | {rate:.1f} |")
    print(
        f"batched / baseline: {statistics.median(ratios):.2f}x "
        f"[{ratios[0]:.2f} - {ratios[-1]:.2f}]; replies equal in every round: "
        f"{all(row['equal'] for row in rows)}"
    )


if __name__ == "__main__":
    main()
