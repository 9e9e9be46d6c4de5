"""A text stream's inter-token latency next to image requests on one mlx-vlm worker.

    python -m scripts.bench_vision_interleave [--rounds 5] [--chunks 2048,64] [--image-size 672]
        [--model DIR] [--images 2]

For each prefill chunk size in `--chunks`, starts the real server on the checkpoint (the tiny
Qwen2-VL at size `bench` unless --model) with `--prefill-step-size` that size and no caches
(`--vision-cache-entries 0 --prefix-cache-bytes 0`: every image request encodes its picture and
prefills its whole prompt), then, `--rounds` times each:
- alone: a streamed greedy chat completion of `--tokens` tokens, the gaps between its chunks;
- beside images: the same stream while `--images` clients send image requests back to back
  (a noise picture each, the same every time: with the caches off it is encoded and prefilled
  anew; `max_tokens` 1: all prefill), started first.
Prints, per chunk size, the stream's inter-token p50 / p99 / max alone and beside images and
the p99 ratio (issue 38's target: within 2x of alone), and the image requests' latency. The
worker advances its requests a unit at a time (worker/vision/paced.py: a token, the vision
encoding, or one prefill chunk), so the chunk size bounds how long a token can wait; the
vision encoding of one picture is one unit whatever the chunk size.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from scripts.bench_vision import picture
from tests.support.server import ServerProcess
from worker.tiny_models import ensure_checkpoint


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


def measure(args: argparse.Namespace, path: Path, chunk: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="bench_vision_interleave."))
    serve = [str(path), "--prefill-step-size", str(chunk), "--vision-cache-entries", "0",
             "--prefix-cache-bytes", "0", "--blas", args.blas]  # fmt: skip
    server = ServerProcess(serve, tmp / "server.log", api_key=None)
    alone: list[float] = []
    beside: list[float] = []
    image_latencies: list[float] = []
    try:
        server.wait_healthy()
        client = httpx.Client(base_url=server.url, timeout=600)
        model = path.name
        stream_gaps(client, model, 8)  # untimed: first calls, the connection
        for round_ in range(args.rounds):
            alone += stream_gaps(client, model, args.tokens)
            loads = [
                ImageLoad(server.url, model, args.image_size, 1000 * round_ + 100 * i)
                for i in range(args.images)
            ]
            for load in loads:
                load.start()
                load.started.wait(60)
            time.sleep(0.2)
            beside += stream_gaps(client, model, args.tokens)
            for load in loads:
                load.stop.set()
            for load in loads:
                load.join(600)
                if load.error is not None:
                    raise SystemExit(f"image request failed: {load.error!r}")
                image_latencies += load.latencies
    finally:
        server.stop()
    return {"chunk": chunk, "alone": alone, "beside": beside, "images": image_latencies}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="checkpoint directory [default: qwen2_vl at size bench]")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunks", default="2048,64", help="--prefill-step-size values")
    parser.add_argument("--tokens", type=int, default=48, help="the text stream's max_tokens")
    parser.add_argument("--images", type=int, default=2, help="concurrent image clients")
    parser.add_argument("--image-size", type=int, default=672, help="square picture side")
    parser.add_argument("--blas", default="auto", help="the server's --blas")
    parser.add_argument("--json", action="store_true", help="print the raw gaps as JSON too")
    args = parser.parse_args(argv)
    path = Path(args.model) if args.model else ensure_checkpoint("qwen2_vl", "bench")
    results = [measure(args, path, int(chunk)) for chunk in args.chunks.split(",")]
    print(
        f"{path.name}: a {args.tokens}-token text stream alone and beside {args.images} image "
        f"clients ({args.image_size}x{args.image_size}), {args.rounds} rounds; inter-token ms"
    )
    print("| --prefill-step-size | alone p50 / p99 / max | beside p50 / p99 / max "
          "| p99 beside / alone | image request median |")  # fmt: skip
    print("| --- | --- | --- | --- | --- |")
    for r in results:
        a, b = r["alone"], r["beside"]
        cells = [
            " / ".join(f"{percentile(v, q) * 1000:.0f}" for q in (0.5, 0.99, 1.0)) for v in (a, b)
        ]
        ratio = percentile(b, 0.99) / percentile(a, 0.99)
        image = statistics.median(r["images"]) * 1000 if r["images"] else float("nan")
        print(f"| {r['chunk']} | {cells[0]} | {cells[1]} | {ratio:.1f}x | {image:.0f} ms |")
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
