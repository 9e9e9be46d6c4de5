"""Images out: seconds per picture through the server vs direct mlx-vlm, side by side.

    python -m scripts.bench_images [--model IMAGE_MODEL_DIR] [--size 256] [--steps 4]
        [--rounds 3] [--concurrent 2] [--blas bundled] [--one-copy]

Without --model the tiny random-weight Z-Image (`worker/tiny_models`, `z_image` / `tiny`) is
used, which shows the plumbing, not a model's speed: pass a bigger checkpoint (`--model` of
`python -m worker.tiny_models --arch z_image --size medium`, or a real one) to measure what the
pacing costs where steps take real time. The script starts `vllm-omni-mlx serve MODEL --blas
bundled` (the worker then has this process's BLAS) and stops it at the end.

One measurement makes one picture of --size x --size with --steps steps, seed fixed:
- direct: `generate_image(load_image_generation_model(MODEL), request)` in this process (the
  model loaded once, as a server would);
- server: `POST /v1/images/generations` (b64_json) on a kept-alive connection, which includes
  the PNG encoding and base64 of the answer;
- server, --concurrent requests at once: the steps of the requests interleave on the worker's
  one MLX thread, so the aggregate pictures per second show what the interleaving costs.
Rounds alternate which side goes first; the table shows the medians and the ratios. A model
over half the machine's memory cannot be held twice: with --one-copy the server's rounds run
first, then the server is stopped and this process loads the model for the direct rounds (the
sides then do not alternate), and there is no warm-up picture: a full-size picture takes
minutes on a CPU, so each side's first picture also reads the weights in (mlx-vlm loads them
lazily, on first use, on both sides alike).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from scripts.bench_sides import free_port, ours, side_env
from worker.tiny_models import ensure_checkpoint

PROMPT = "a lighthouse on a cliff at dusk, oil painting"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", help="an image-generation checkpoint [default: the tiny Z-Image]")
    p.add_argument("--size", type=int, default=256, help="width and height in pixels")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrent", type=int, default=2, help="requests at once (0: skip)")
    p.add_argument("--blas", choices=["bundled", "openblas"], default="bundled")
    p.add_argument("--one-copy", action="store_true",
                   help="one copy of the model in memory at a time: the server's rounds, then the direct ones")  # fmt: skip
    return p.parse_args()


def direct_seconds(model, size: int, steps: int, seed: int) -> float:
    from mlx_vlm.generate.image import ImageGenerationRequest, generate_image

    started = time.perf_counter()
    request = ImageGenerationRequest(PROMPT, seed=seed, steps=steps, width=size, height=size)
    generate_image(model, request)
    return time.perf_counter() - started


def server_seconds(client: httpx.Client, size: int, steps: int, seed: int) -> float:
    body = {
        "prompt": PROMPT, "size": f"{size}x{size}", "num_inference_steps": steps, "seed": seed,
    }  # fmt: skip
    started = time.perf_counter()
    response = client.post("/v1/images/generations", json=body)
    response.raise_for_status()
    return time.perf_counter() - started


def concurrent_seconds(url: str, count: int, size: int, steps: int) -> float:
    """Seconds for `count` pictures requested at once (one connection each)."""

    def one(seed: int) -> None:
        with httpx.Client(base_url=url, timeout=3600) as client:
            server_seconds(client, size, steps, seed)

    started = time.perf_counter()
    with ThreadPoolExecutor(count) as pool:
        list(pool.map(one, range(count)))
    return time.perf_counter() - started


def load(path: str):
    from mlx_vlm.generate.image import load_image_generation_model

    return load_image_generation_model(path, evict_text_encoder=False)


def main() -> int:
    args = parse_args()
    path = args.model or str(ensure_checkpoint("z_image", "tiny"))
    model = None if args.one_copy else load(path)
    log_dir = Path(tempfile.mkdtemp(prefix="bench-images-"))
    port = free_port()
    server = ours(path, port, args.blas, log_dir, 8)
    server.start(side_env(args.blas), port)
    server.wait_ready(timeout=1800)  # a full-size model loads for minutes
    times: dict[str, list[float]] = {"direct": [], "server": [], "concurrent": []}
    size, steps = args.size, args.steps
    try:
        client = httpx.Client(base_url=server.url, timeout=3600)
        if model is not None:  # warm-up for both sides
            server_seconds(client, size, steps, 0)
            direct_seconds(model, size, steps, 0)
        for round_ in range(args.rounds):
            sides = [("server", lambda: server_seconds(client, size, steps, 1))]
            if model is not None:
                sides.append(("direct", lambda: direct_seconds(model, size, steps, 1)))
            for side, measure in sides if round_ % 2 == 0 else sides[::-1]:
                times[side].append(measure())
            if args.concurrent:
                took = concurrent_seconds(server.url, args.concurrent, size, steps)
                times["concurrent"].append(took / args.concurrent)
            print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        server.stop()
    if model is None:  # --one-copy: the direct rounds, the server's memory given back
        model = load(path)
        for round_ in range(args.rounds):
            times["direct"].append(direct_seconds(model, size, steps, 1))
            print(f"direct round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    direct = statistics.median(times["direct"])
    served = statistics.median(times["server"])
    order = "server rounds, then direct ones" if args.one_copy else "sides alternating"
    print(f"model {path}, {size}x{size}, {steps} steps, {args.rounds} rounds, {order}\n")
    print("| side | s / picture | direct / side |")
    print("| --- | --- | --- |")
    print(f"| direct mlx-vlm | {direct:.3f} | 1.00 |")
    print(f"| server, one at a time | {served:.3f} | {direct / served:.2f} |")
    if times["concurrent"]:
        each = statistics.median(times["concurrent"])
        print(
            f"| server, {args.concurrent} at once (per picture) | {each:.3f} | {direct / each:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
