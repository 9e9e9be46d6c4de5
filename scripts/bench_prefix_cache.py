"""Time to first token of a conversation's second turn: cold full prefill vs the prefix cache.

Direct, in-process mlx-lm (no server): turn 1 is `--history` random tokens plus a greedy reply
whose cache goes into a `PrefixCache`; turn 2 adds a short follow-up. Cold and cached runs are
interleaved and their medians compared (this machine is noisy: only the ratio is worth quoting).
Each pair must produce the same first token. Usage:
`python -m scripts.bench_prefix_cache --size 20m --history 2000 --runs 5`
(on Linux CPU, with `LD_PRELOAD=<system libopenblas.so.0>` for the worker's fast path).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

import mlx.core as mx
from mlx_lm import load
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache

from worker.cache.prefix_cache import PrefixCache
from worker.tiny_models import ensure_checkpoint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="qwen3")
    parser.add_argument("--size", default="20m")
    parser.add_argument("--history", type=int, default=2000)
    parser.add_argument("--follow-up", type=int, default=24)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    model, _ = load(str(ensure_checkpoint(args.arch, size=args.size)))
    vocab = model.args.vocab_size - 100  # clear of the added (special) tokens at the end
    rng = random.Random(0)
    history = [rng.randrange(10, vocab) for _ in range(args.history)]
    cache = make_prompt_cache(model)
    reply = [
        t for t, _ in generate_step(mx.array(history), model, prompt_cache=cache, max_tokens=32)
    ]
    turn2 = history + reply + [rng.randrange(10, vocab) for _ in range(args.follow_up)]
    prefix_cache = PrefixCache(1 << 34, "bench")
    prefix_cache.insert(history + reply, cache)

    def first_token(prompt: list[int], kv: list) -> int:
        return next(generate_step(mx.array(prompt), model, prompt_cache=kv))[0]

    def timed(run: Callable[[], int]) -> tuple[float, int]:
        start = time.perf_counter()
        token = run()
        return time.perf_counter() - start, token

    def cached() -> int:
        kv, remaining = prefix_cache.fetch(turn2)
        return first_token(remaining, kv)

    timed(cached)  # warm-up
    colds, warms = [], []
    for _ in range(args.runs):
        (c, cold_token), (w, cached_token) = (
            timed(lambda: first_token(turn2, make_prompt_cache(model))),
            timed(cached),
        )
        assert cold_token == cached_token, "the prefix cache changed the first token"
        colds.append(c)
        warms.append(w)
    c, w = statistics.median(colds), statistics.median(warms)
    reused = len(history) + len(reply)
    print(
        f"{args.arch}-{args.size}: prompt {len(turn2)} tokens, {reused} from the prefix cache; "
        f"TTFT cold {c * 1000:.0f} ms, cached {w * 1000:.0f} ms, speedup {c / w:.1f}x "
        f"(median of {args.runs})"
    )


if __name__ == "__main__":
    main()
