"""What a prefill chunk adds to a decode step: as a model call of its own, or inside the step's
forward pass (worker/text/fused_forward.py). In process, no server, one thread.

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libopenblas.so.0 \\
        python -m scripts.profile_fused_pass [--size 20m-64k] [--context 2000] [--decode-context 200]
        [--chunks 1,2,8,32] [--repeats 20]

One decoding row with `--decode-context` tokens in its cache, and a prompt with `--context`
tokens already prefilled (both in mlx-lm's batch caches, as BatchGenerator holds them). For each
chunk size it times, median of `--repeats`, each from fresh copies of the caches:

- `decode`: the decode step alone (`model(token, decode cache)`);
- `chunk`: the chunk alone (`model(chunk, prompt cache)`, evaluated as mlx-lm's prefill does);
- `two calls`: the decode step, then the chunk (what mlx-lm's `BatchGenerator.next` runs);
- `fused`: both in one forward pass (`fused_logits`).

`two calls - decode` is what a chunk costs the decoding streams today in mlx-lm; `fused -
decode` is what it costs inside the decode pass.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

from worker.text.fused_forward import fusable, fused_logits
from worker.text.model import load_text_model

PREFILL_STEP = 2048


def batch_cache(model: Any, prompt: list[int]) -> list:
    cache = make_prompt_cache(model)
    for start in range(0, len(prompt), PREFILL_STEP):  # in chunks, as mlx-lm prefills
        model(mx.array([prompt[start : start + PREFILL_STEP]]), cache=cache)
        mx.eval([c.state for c in cache])
    merged = [layer.merge([layer]) for layer in cache]  # a BatchKVCache, as mlx-lm batches
    mx.eval([c.state for c in merged])
    return merged


def median_ms(run: Callable[[], None], repeats: int) -> float:
    run()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def profile(model: Any, context: int, decode_context: int, chunks: list[int], repeats: int):
    decode0 = batch_cache(model, [5 + i % 1000 for i in range(decode_context)])
    prompt0 = batch_cache(model, [7 + i % 1000 for i in range(context)])
    step = mx.array([[11]])

    def fresh() -> tuple[list, list]:
        return copy.deepcopy(decode0), copy.deepcopy(prompt0)

    def decode_alone() -> None:
        decode, _ = fresh()
        mx.eval(model(step, cache=decode))

    rows = [("decode", 0, median_ms(decode_alone, repeats))]
    for n in chunks:
        tokens = mx.array([[13 + i for i in range(n)]])

        def chunk_alone(tokens: mx.array = tokens) -> None:
            _, prompt = fresh()
            model(tokens, cache=prompt)
            mx.eval([c.state for c in prompt])

        def two_calls(tokens: mx.array = tokens) -> None:
            decode, prompt = fresh()
            mx.eval(model(step, cache=decode))
            model(tokens, cache=prompt)
            mx.eval([c.state for c in prompt])

        def fused(tokens: mx.array = tokens) -> None:
            decode, prompt = fresh()
            logits = fused_logits(model, step, decode, tokens, prompt)
            mx.eval(logits, [c.state for c in prompt])

        for name, run in (("chunk", chunk_alone), ("two calls", two_calls), ("fused", fused)):
            rows.append((name, n, median_ms(run, repeats)))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", help="checkpoint [default: the qwen3 checkpoint of --size]")
    p.add_argument("--size", default="20m-64k")
    p.add_argument("--context", type=int, default=2000, help="prompt tokens already prefilled")
    p.add_argument("--decode-context", type=int, default=200)
    p.add_argument("--chunks", default="1,2,8,32")
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args()
    path = args.model
    if path is None:
        from worker.tiny_models import ensure_checkpoint

        path = str(ensure_checkpoint("qwen3", args.size))
    model = load_text_model(path).model
    if not fusable(model):
        raise SystemExit(f"{path}: not a family fused_forward supports")
    chunks = [int(n) for n in args.chunks.split(",")]
    rows = profile(model, args.context, args.decode_context, chunks, args.repeats)
    decode = rows[0][2]
    print(f"{path}: prompt context {args.context}, decode context {args.decode_context}")
    print(f"decode step alone: {decode:.2f} ms")
    print("| chunk tokens | chunk alone | two calls (+ over decode) | fused (+ over decode) |")
    print("| ---: | ---: | ---: | ---: |")
    by = {(name, n): ms for name, n, ms in rows}
    for n in chunks:
        two, fused = by[("two calls", n)], by[("fused", n)]
        print(f"| {n} | {by[('chunk', n)]:.2f} ms | {two:.2f} ms (+{two - decode:.2f}) | "
              f"{fused:.2f} ms (+{fused - decode:.2f}) |")  # fmt: skip


if __name__ == "__main__":
    main()
