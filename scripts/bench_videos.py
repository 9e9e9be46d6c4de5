"""Video out: seconds per clip through the server (a /v1/videos job) vs direct mlx-vlm, side
by side.

    python -m scripts.bench_videos [--model VIDEO_MODEL_DIR] [--size 64] [--steps 8]
        [--seconds 5] [--rounds 3] [--blas bundled]

Without --model the "medium" random-weight MiniMax-H3 (`worker/tiny_models`, `minimax_h3` /
`medium`: a 512-wide transformer of 8 blocks) is built and used, so that the denoising steps take
real time; `--model` takes any H3 folder. The script starts `vllm-omni-mlx serve MODEL --blas
bundled` (the worker then has this process's BLAS) and stops it at the end.

One measurement makes one clip of --size x --size pixels, --seconds long, with --steps steps,
seed fixed, and its MP4:
- direct: `generate_video(load_video_generation_model(MODEL), request)` then `result.save()`
  in this process (the model loaded once, as a server would);
- server: `POST /v1/videos`, `GET /v1/videos/{id}` every 20 ms until completed, then `GET
  /v1/videos/{id}/content`: the job's whole round trip, the MP4 downloaded.
Rounds alternate which side goes first, after one warm-up clip a side; the table shows the
medians and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from scripts.bench_sides import free_port, ours, side_env
from worker.tiny_models import ensure_checkpoint

PROMPT = "waves breaking on a rocky shore at dusk, with the sound of the sea"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", help="a MiniMax-H3 folder [default: the medium random-weight one]")
    p.add_argument("--size", type=int, default=64, help="width and height, multiples of 32")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--blas", choices=["bundled", "openblas"], default="bundled")
    return p.parse_args()


def direct_seconds(model, args: argparse.Namespace, seed: int) -> float:
    from mlx_vlm.generate.video_generation import VideoGenerationRequest, generate_video
    from mlx_vlm.models.minimax_h3.packing import align_num_frames

    started = time.perf_counter()
    request = VideoGenerationRequest(
        PROMPT, seed=seed, steps=args.steps, width=args.size, height=args.size,
        num_frames=align_num_frames(round(args.seconds * 24)),
        extra={"drop_adaln_weights": False},
    )  # fmt: skip
    result = generate_video(model, request)
    with tempfile.TemporaryDirectory() as folder:
        result.save(Path(folder) / "clip.mp4")
    return time.perf_counter() - started


def server_seconds(client: httpx.Client, args: argparse.Namespace, seed: int) -> float:
    body = {
        "prompt": PROMPT, "size": f"{args.size}x{args.size}", "seconds": f"{args.seconds:g}",
        "num_inference_steps": args.steps, "seed": seed,
    }  # fmt: skip
    started = time.perf_counter()
    job = client.post("/v1/videos", json=body).json()
    while (video := client.get(f"/v1/videos/{job['id']}").json())["status"] not in (
        "completed",
        "failed",
    ):
        time.sleep(0.02)
    if video["status"] != "completed":
        raise RuntimeError(f"the job failed: {video['error']}")
    client.get(f"/v1/videos/{job['id']}/content").raise_for_status()
    return time.perf_counter() - started


def main() -> int:
    from mlx_vlm.generate.video_generation import load_video_generation_model

    args = parse_args()
    path = args.model or str(ensure_checkpoint("minimax_h3", "medium"))
    model = load_video_generation_model(path, workflow="t2va")
    log_dir = Path(tempfile.mkdtemp(prefix="bench-videos-"))
    port = free_port()
    server = ours(path, port, args.blas, log_dir, 8)
    server.start(side_env(args.blas), port)
    server.wait_ready(timeout=600)
    times: dict[str, list[float]] = {"direct": [], "server": []}
    try:
        client = httpx.Client(base_url=server.url, timeout=3600)
        server_seconds(client, args, 0)  # warm-up for both sides
        direct_seconds(model, args, 0)
        for round_ in range(args.rounds):
            sides = [
                ("server", lambda: server_seconds(client, args, 1)),
                ("direct", lambda: direct_seconds(model, args, 1)),
            ]
            for side, measure in sides if round_ % 2 == 0 else sides[::-1]:
                times[side].append(measure())
            print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        server.stop()
    direct = statistics.median(times["direct"])
    served = statistics.median(times["server"])
    print(
        f"model {path}, {args.size}x{args.size}, {args.seconds:g} s, {args.steps} steps, "
        f"{args.rounds} rounds, sides alternating\n"
    )
    print("| side | s / clip (MP4 included) | direct / side |")
    print("| --- | --- | --- |")
    print(f"| direct mlx-vlm | {direct:.3f} | 1.00 |")
    print(f"| server, a /v1/videos job | {served:.3f} | {direct / served:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
