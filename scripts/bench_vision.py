"""Images in chat: what the image-feature cache and the conversation cache save, through the server.

    python -m scripts.bench_vision --rounds 5 [--model DIR] [--json out.json]

Three servers on the same checkpoint (the ~40M-parameter tiny Qwen2-VL at size `bench` unless
--model), OpenBLAS preloaded into each worker, with:
- "none": no image-feature cache and no prefix cache (`--vision-cache-entries 0
  --prefix-cache-bytes 0`): every request encodes its image and prefills everything;
- "features": the image-feature cache only (`--prefix-cache-bytes 0`);
- "all": the defaults (feature cache and prefix caches, incl. conversations with images).
Scenarios, each request with `max_tokens` 1 and not streamed, so its latency is its TTFT
(prefill plus one token) seen by an HTTP client:
- repeated image: a new question about an image the server has seen (its features cached on
  "features"), compared with "none";
- follow-up turn: turn 2 of a conversation about an image (turn 1 answered just before), on
  "all" compared with "none".
Each round runs every scenario on every server back to back (the order rotating each round);
ratios are taken within a round and their median over rounds is reported, as in
scripts/bench_compare.py (this machine is small and shared: only ratios of interleaved runs
say anything).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from PIL import Image

from scripts.bench_sides import ServerSide, free_port, ours, side_env
from worker.tiny_models import ensure_checkpoint

SERVERS = {
    "none": ["--vision-cache-entries", "0", "--prefix-cache-bytes", "0"],
    "features": ["--prefix-cache-bytes", "0"],
    "all": [],
}
HISTORY = "Describe this picture: the colours, the shapes, and what it could show."


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", help="checkpoint directory [default: qwen2_vl at size bench]")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--image-size", type=int, default=448, help="square image side, pixels")
    p.add_argument("--answer-tokens", type=int, default=32, help="turn 1's answer length")
    p.add_argument("--json", help="write every measurement here")
    return p.parse_args()


def picture(seed: int, side: int) -> str:
    pixels = np.random.default_rng(seed).integers(0, 256, (side, side, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def image_turn(text: str, url: str) -> dict:
    return {
        "role": "user",
        "content": [
            {"type": "image_url", "image_url": {"url": url}},
            {"type": "text", "text": text},
        ],
    }


def chat(client: httpx.Client, messages: list[dict], max_tokens: int) -> tuple[float, dict]:
    model = client.get("/v1/models").json()["data"][0]["id"]
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
    started = time.perf_counter()
    response = client.post("/v1/chat/completions", json=body)
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    return elapsed, response.json()


def repeated_image(client: httpx.Client, url: str, round_no: int) -> float:
    """Latency of a new question about an image the server has just seen."""
    chat(client, [image_turn(f"Seen before? ({round_no})", url)], 1)
    elapsed, _ = chat(client, [image_turn(f"What else is in it? ({round_no})", url)], 1)
    return elapsed


def follow_up(client: httpx.Client, url: str, answer_tokens: int) -> tuple[float, int]:
    """Latency of turn 2 (turn 1 answered just before), and its cached prompt tokens."""
    first = [image_turn(HISTORY, url)]
    _, reply = chat(client, first, answer_tokens)
    answer = reply["choices"][0]["message"]["content"]
    second = first + [
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "And what else?"},
    ]
    elapsed, reply = chat(client, second, 1)
    details = reply["usage"].get("prompt_tokens_details") or {}
    return elapsed, int(details.get("cached_tokens") or 0)


def start_servers(model: str, log_dir: Path) -> dict[str, ServerSide]:
    env = side_env("openblas")
    servers = {}
    for name, flags in SERVERS.items():
        side = ours(model, free_port(), "openblas", log_dir, 4)
        side.name = f"ours-{name}"
        side.command += flags
        side.log_path = log_dir / f"{name}.log"
        side.start(env, int(side.command[side.command.index("--port") + 1]))
        servers[name] = side
    for side in servers.values():
        side.wait_ready()
    return servers


def main() -> None:
    args = parse_args()
    model = args.model or str(ensure_checkpoint("qwen2_vl", "bench"))
    log_dir = Path(tempfile.mkdtemp(prefix="bench-vision-"))
    servers = start_servers(model, log_dir)
    measured: list[dict] = []
    try:
        clients = {n: httpx.Client(base_url=s.url, timeout=600) for n, s in servers.items()}
        # Warm-up: every server loads its kernels once on an unrelated image.
        for client in clients.values():
            chat(client, [image_turn("warm up", picture(10_000, args.image_size))], 1)
        names = list(servers)
        for r in range(args.rounds):
            url = picture(r, args.image_size)
            order = names[r % len(names) :] + names[: r % len(names)]
            row: dict = {"round": r}
            for name in order:
                row[f"repeated_{name}"] = repeated_image(clients[name], url, r)
            for name in order:
                turn_url = picture(1000 + r, args.image_size)
                row[f"turn2_{name}"], row[f"cached_{name}"] = follow_up(
                    clients[name], turn_url, args.answer_tokens
                )
            measured.append(row)
            print(json.dumps(row), flush=True)
    finally:
        for side in servers.values():
            side.stop()
    report(measured, model, args)
    if args.json:
        Path(args.json).write_text(json.dumps({"model": model, "rounds": measured}, indent=2))


def report(rows: list[dict], model: str, args: argparse.Namespace) -> None:
    def median(key: str) -> float:
        return statistics.median(row[key] for row in rows)

    def ratio(numerator: str, denominator: str) -> str:
        values = sorted(row[denominator] / row[numerator] for row in rows)
        return f"{statistics.median(values):.2f}x [{values[0]:.2f} - {values[-1]:.2f}]"

    print(f"\ncheckpoint {model}, {args.image_size}x{args.image_size} images, {len(rows)} rounds")
    print("| scenario | none (s) | features (s) | all (s) | speed-up (median [min - max]) |")
    print("| --- | ---: | ---: | ---: | --- |")
    print(
        f"| repeated image, new question | {median('repeated_none'):.3f} | "
        f"{median('repeated_features'):.3f} | {median('repeated_all'):.3f} | "
        f"features vs none: {ratio('repeated_features', 'repeated_none')} |"
    )
    print(
        f"| follow-up turn | {median('turn2_none'):.3f} | {median('turn2_features'):.3f} | "
        f"{median('turn2_all'):.3f} | all vs none: {ratio('turn2_all', 'turn2_none')}; "
        f"cached tokens on all: {median('cached_all'):.0f} |"
    )


if __name__ == "__main__":
    main()
