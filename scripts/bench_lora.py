"""LoRA adapters at run time, measured side by side in one run: what serving requests under
adapters costs in the worker's continuous batch, against the same batch on the base model and
against mlx-lm's own BatchGenerator on `mlx_lm.load(base, adapter_path=...)`.

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libopenblas.so.0 \
        python -m scripts.bench_lora CHECKPOINT --streams 4 --max-tokens 64 --rounds 3

(On a Linux CPU the worker runs with OpenBLAS preloaded, protocol/launch/blas.py; in-process,
this script gets it only through LD_PRELOAD, as above.)

Sides (each `--streams` greedy completions of the same prompts, `--max-tokens` each, fully
batched, in-process on the worker's engine, no HTTP):
- base: every request on the base model (no adapter loaded);
- one: every request under adapter A;
- mixed: the requests under A, B and the base model in turn, in one batch;
- mlx-lm: mlx-lm's BatchGenerator on the checkpoint loaded with adapter A (its LoRALinear
  layers), the library's own way to batch one adapter.
Two random adapters of rank 4 on every linear layer of every block (built next to the
checkpoint by worker/tiny_models/adapter.py). Reported: aggregate output tok/s per side (the
best of `--rounds`), and the ratios one/mlx-lm, one/base and mixed/base.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

import mlx.core as mx
from mlx_lm import load
from mlx_lm.generate import BatchGenerator
from mlx_lm.sample_utils import make_sampler

from protocol.inputs import CompleteInputs, SamplingParams
from protocol.messages import Submit
from worker.text.adapters.registry import Adapters
from worker.text.batch_engine import BatchTextEngine
from worker.text.model import load_text_model
from worker.text.settings import GenerationSettings
from worker.tiny_models.adapter import ensure_lora_adapter

PROMPTS = [
    "Write a Python function that checks whether a number is prime.",
    "Explain what a hash map is to a new programmer.",
    "List the planets of the solar system with one fact each.",
    "Write a haiku about the sea, then explain it.",
]


def engine_side(text_model, streams: int, max_tokens: int, adapters: list[str | None]) -> float:
    engine = BatchTextEngine(text_model, GenerationSettings(), streams)
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0)
    started = time.perf_counter()
    for i in range(streams):
        prompt = PROMPTS[i % len(PROMPTS)]
        engine.admit(Submit(f"r{i}", CompleteInputs(prompt, params), True, adapter=adapters[i]))
    tokens = 0
    while engine.active_ids():
        tokens += sum(len(d.token_ids) for d in engine.step())
    return tokens / (time.perf_counter() - started)


def mlx_lm_side(model, tokenizer, streams: int, max_tokens: int) -> float:
    prompts = [tokenizer.encode(PROMPTS[i % len(PROMPTS)]) for i in range(streams)]
    generator = BatchGenerator(model, sampler=make_sampler(0.0), completion_batch_size=streams)
    started = time.perf_counter()
    uids = generator.insert(prompts, max_tokens=[max_tokens] * streams)
    tokens, done = 0, set()
    while len(done) < len(uids):
        for response in generator.next()[1]:
            tokens += 1
            if response.finish_reason is not None:
                done.add(response.uid)
    generator.close()
    return tokens / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    paths = [str(ensure_lora_adapter(args.checkpoint, seed=s)) for s in (7, 11)]
    base = load_text_model(args.checkpoint)
    adapted = load_text_model(args.checkpoint)
    adapted = replace(adapted, adapters=Adapters(adapted.model))
    adapted.adapters.load("a", paths[0])
    adapted.adapters.load("b", paths[1])
    reference, tokenizer = load(args.checkpoint, adapter_path=paths[0])
    n = args.streams
    sides = {
        "base": lambda: engine_side(base, n, args.max_tokens, [None] * n),
        "one": lambda: engine_side(adapted, n, args.max_tokens, ["a"] * n),
        "mixed": lambda: engine_side(
            adapted, n, args.max_tokens, [["a", "b", None][i % 3] for i in range(n)]
        ),
        "mlx-lm": lambda: mlx_lm_side(reference, tokenizer, n, args.max_tokens),
    }
    best = {name: 0.0 for name in sides}
    for _ in range(args.rounds):  # the sides interleaved, so drift hits them alike
        for name, run in sides.items():
            mx.clear_cache()
            best[name] = max(best[name], run())
    result = {
        "tok_s": {k: round(v, 2) for k, v in best.items()},
        "one/mlx-lm": round(best["one"] / best["mlx-lm"], 3),
        "one/base": round(best["one"] / best["base"], 3),
        "mixed/base": round(best["mixed"] / best["base"], 3),
        "streams": n,
        "max_tokens": args.max_tokens,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
