"""A text stream's inter-token latency next to image requests on one mlx-vlm worker.

    python -m scripts.bench_vision_interleave [--rounds 5] [--chunks 2048,64] [--image-size 672]
        [--model DIR] [--images 2] [--baseline REV]

For each prefill chunk size in `--chunks`, starts the real server on the checkpoint (the tiny
Qwen2-VL at size `bench` unless --model) with `--prefill-step-size` that size and no caches
(`--vision-cache-entries 0 --prefix-cache-bytes 0`: every image request encodes its picture and
prefills its whole prompt), then, `--rounds` times each:
- alone: a streamed greedy chat completion of `--tokens` tokens, the gaps between its chunks;
- beside images: the same stream while `--images` clients send image requests back to back
  (a noise picture each, the same every time: with the caches off it is encoded and prefilled
  anew; `max_tokens` 1: all prefill), started first.
With `--baseline REV` a second server runs the code at git revision REV (a worktree of this
repository, its PYTHONPATH), started beside the first; the two take turns round by round.
Prints, per server and chunk size, the stream's inter-token p50 / p99 / max alone and beside
images and the p99 ratio (issue 38's target: within 2x of alone), and the image requests'
latency. The worker advances a picture's prefill a unit at a time beside the decoding stream
(worker/vision/paced.py: a block of the vision tower or a prefill chunk; beside a streamed
request, a slice of a block or one decoder layer of a chunk, sized to the decode step:
worker/vision/slicing.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx

from scripts.bench_vision import picture
from tests.support.server import ServerProcess
from worker.tiny_models import ensure_checkpoint

REPO = Path(__file__).resolve().parent.parent


class ImageLoad(threading.Thread):
    """Image requests back to back until `stop` is set; their latencies."""

    def __init__(self, url: str, model: str, side: int, seed: int) -> None:
        super().__init__(daemon=True)
        self.url, self.model = url, model
        # Made once: encoding a noise PNG per request would take this process's CPU (and the
        # GIL) from the stream being timed. The caches are off, so a repeat is work as new.
        self.picture = picture(seed, side)
        self.stop = threading.Event()
        self.started = threading.Event()
        self.latencies: list[float] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with httpx.Client(base_url=self.url, timeout=600) as client:
                while not self.stop.is_set():
                    content = [
                        {"type": "image_url", "image_url": {"url": self.picture}},
                        {"type": "text", "text": "What is in this picture?"},
                    ]
                    body = {
                        "model": self.model,
                        "messages": [{"role": "user", "content": content}],
                        "max_tokens": 1,
                        "temperature": 0,
                    }
                    self.started.set()
                    began = time.perf_counter()
                    client.post("/v1/chat/completions", json=body).raise_for_status()
                    self.latencies.append(time.perf_counter() - began)
        except BaseException as exc:  # reported by the caller
            self.error = exc
        finally:
            self.started.set()


def stream_gaps(client: httpx.Client, model: str, tokens: int) -> list[float]:
    """The gaps between a streamed chat's tokens (its first token excluded). With `logprobs`
    every token is an event even where it adds no text (a random-weight model's tokens often
    decode to nothing until a character is whole); an event with k tokens counts k gaps of
    its gap / k."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Tell me a long story about a fox."}],
        "max_tokens": tokens,
        "temperature": 0,
        "stream": True,
        "logprobs": True,
    }
    gaps: list[float] = []
    last = None
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            choices = json.loads(line[len("data: ") :]).get("choices") or [{}]
            count = len((choices[0].get("logprobs") or {}).get("content") or [])
            if not count:
                continue
            now = time.perf_counter()
            if last is not None:
                gaps += [(now - last) / count] * count
            last = now
    return gaps


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


@contextlib.contextmanager
def servers(args: argparse.Namespace, path: Path, chunk: int, sides: dict[str, Path]):
    """One server per side (its code: the PYTHONPATH its gateway and worker import), started
    side by side with `--prefill-step-size` `chunk` and no caches."""
    tmp = Path(tempfile.mkdtemp(prefix="bench_vision_interleave."))
    serve = [str(path), "--prefill-step-size", str(chunk), "--vision-cache-entries", "0",
             "--prefix-cache-bytes", "0", "--blas", args.blas]  # fmt: skip
    if args.interleave is not None:
        serve += ["--prefill-interleave", str(args.interleave)]
    started: dict[str, ServerProcess] = {}
    before = os.environ.get("PYTHONPATH")
    try:
        for name, code in sides.items():
            os.environ["PYTHONPATH"] = str(code)
            started[name] = ServerProcess(serve, tmp / f"{name}-{chunk}.log", api_key=None)
        if before is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = before
        for server in started.values():
            server.wait_healthy()
        yield started
    finally:
        for server in started.values():
            server.stop()


def measure_round(args: argparse.Namespace, server: ServerProcess, model: str, round_: int) -> dict:
    """One round on one server: the stream alone, then beside the image clients."""
    client = httpx.Client(base_url=server.url, timeout=600)
    alone = stream_gaps(client, model, args.tokens)
    loads = [
        ImageLoad(server.url, model, args.image_size, 1000 * round_ + 100 * i)
        for i in range(args.images)
    ]
    for load in loads:
        load.start()
        load.started.wait(60)
    time.sleep(0.2)
    beside = stream_gaps(client, model, args.tokens)
    for load in loads:
        load.stop.set()
    for load in loads:
        load.join(600)
        if load.error is not None:
            raise SystemExit(f"image request failed: {load.error!r}")
    images = [latency for load in loads for latency in load.latencies]
    return {"alone": alone, "beside": beside, "images": images}


def measure(args: argparse.Namespace, path: Path, chunk: int, sides: dict[str, Path]) -> list:
    """Per side: its gaps alone and beside images, and the image requests' latencies, the
    sides taking turns round by round (the order alternating)."""
    results = {name: {"side": name, "chunk": chunk, "alone": [], "beside": [], "images": []}
               for name in sides}  # fmt: skip
    with servers(args, path, chunk, sides) as started:
        for server in started.values():
            stream_gaps(httpx.Client(base_url=server.url, timeout=600), path.name, 8)  # warm
        for round_ in range(args.rounds):
            names = list(started) if round_ % 2 == 0 else list(reversed(started))
            for name in names:
                got = measure_round(args, started[name], path.name, round_)
                for key, values in got.items():
                    results[name][key] += values
    return list(results.values())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="checkpoint directory [default: qwen2_vl at size bench]")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunks", default="2048,64", help="--prefill-step-size values")
    parser.add_argument("--tokens", type=int, default=48, help="the text stream's max_tokens")
    parser.add_argument("--images", type=int, default=2, help="concurrent image clients")
    parser.add_argument("--image-size", type=int, default=672, help="square picture side")
    parser.add_argument("--blas", default="auto", help="the server's --blas")
    parser.add_argument("--baseline", help="git revision of a second server's code, run beside")
    parser.add_argument("--interleave", type=float, help="the servers' --prefill-interleave")
    parser.add_argument("--json", action="store_true", help="print the raw gaps as JSON too")
    args = parser.parse_args(argv)
    path = Path(args.model) if args.model else ensure_checkpoint("qwen2_vl", "bench")
    sides = {"this": REPO}
    worktree = None
    if args.baseline:
        worktree = Path(tempfile.mkdtemp(prefix="bench_vision_interleave.base.")) / "code"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(worktree), args.baseline],
            check=True, capture_output=True,
        )  # fmt: skip
        sides["baseline"] = worktree
    try:
        results = [
            r for chunk in args.chunks.split(",") for r in measure(args, path, int(chunk), sides)
        ]
    finally:
        if worktree is not None:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(worktree)],
                check=False, capture_output=True,
            )  # fmt: skip
    print(
        f"{path.name}: a {args.tokens}-token text stream alone and beside {args.images} image "
        f"clients ({args.image_size}x{args.image_size}), {args.rounds} rounds; inter-token ms"
    )
    print("| code | --prefill-step-size | alone p50 / p99 / max | beside p50 / p99 / max "
          "| p99 beside / alone | image request median |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for r in results:
        a, b = r["alone"], r["beside"]
        cells = [
            " / ".join(f"{percentile(v, q) * 1000:.0f}" for q in (0.5, 0.99, 1.0)) for v in (a, b)
        ]
        ratio = percentile(b, 0.99) / percentile(a, 0.99)
        image = statistics.median(r["images"]) * 1000 if r["images"] else float("nan")
        code = "this" if r["side"] == "this" else f"{args.baseline}"
        print(
            f"| {code} | {r['chunk']} | {cells[0]} | {cells[1]} | {ratio:.1f}x | {image:.0f} ms |"
        )
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
