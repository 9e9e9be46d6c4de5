"""Single-stream decode speed of mlx-lm's two generation paths, interleaved in one process.

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libopenblas.so.0 OPENBLAS_NUM_THREADS=1 \\
        python -m scripts.profile_decode_paths --rounds 8

`stream_generate` (what the foundation worker ran per request) against `BatchGenerator` with
one sequence (what the continuous-batching worker runs when one request is active): tokens
after the first over the time from the first token to the last, greedy, the same prompt.
Explains how much of a single stream's decode gap to direct `stream_generate` comes from the
batched path itself rather than from the server around it.
"""

from __future__ import annotations

import argparse
import statistics
import time

from mlx_lm import load, stream_generate
from mlx_lm.generate import BatchGenerator
from mlx_lm.sample_utils import make_sampler


def decode_rate(times: list[float]) -> float:
    return (len(times) - 1) / (times[-1] - times[0])


def via_stream_generate(model, tokenizer, prompt: list[int], max_tokens: int) -> float:
    times = []
    for _ in stream_generate(
        model, tokenizer, prompt, max_tokens=max_tokens, sampler=make_sampler(0.0)
    ):
        times.append(time.perf_counter())
    return decode_rate(times)


def via_batch_generator(model, tokenizer, prompt: list[int], max_tokens: int) -> float:
    eos = [[t] for t in sorted(tokenizer.eos_token_ids)]
    generator = BatchGenerator(
        model, stop_tokens=eos, completion_batch_size=8, prefill_batch_size=8
    )
    generator.insert([prompt], [max_tokens])
    times, done = [], False
    while not done:
        for response in generator.next_generated():
            times.append(time.perf_counter())
            done = response.finish_reason is not None
    generator.close()
    return decode_rate(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", help="checkpoint [default: the 20m qwen3 tiny checkpoint]")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--max-tokens", type=int, default=128)
    args = p.parse_args()
    if args.model is None:
        from worker.tiny_models import ensure_checkpoint

        args.model = str(ensure_checkpoint("qwen3", size="20m"))
    model, tokenizer = load(args.model)
    prompt = tokenizer.encode(" the of and to in" * (args.prompt_tokens // 5))[: args.prompt_tokens]
    via_stream_generate(model, tokenizer, prompt, 8)  # warm-up both paths
    via_batch_generator(model, tokenizer, prompt, 8)
    ratios, rates = [], {"stream_generate": [], "BatchGenerator": []}
    for round_ in range(args.rounds):
        paths = [("stream_generate", via_stream_generate), ("BatchGenerator", via_batch_generator)]
        for name, run in paths if round_ % 2 == 0 else paths[::-1]:
            rates[name].append(run(model, tokenizer, prompt, args.max_tokens))
        ratios.append(rates["BatchGenerator"][-1] / rates["stream_generate"][-1])
    for name, values in rates.items():
        print(
            f"{name:16s} decode tok/s median {statistics.median(values):6.1f}  all {[round(v, 1) for v in values]}"
        )
    print(f"BatchGenerator / stream_generate: median {statistics.median(ratios):.3f}, "
          f"range {min(ratios):.3f}-{max(ratios):.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
