"""Per-step profile of the batch engine, in process: a stream decoding alone, then beside a long
prefill, every step of the worker's BatchTextEngine timed and taken apart.

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libopenblas.so.0 \\
        python -m scripts.profile_steps [--size tiny-64k] [--long 30000] [--alone-steps 400]
        [--ratio 0.7] [--stream-tokens 256] [--streams 1] [--host-ms 0] [--unfused]
        [--json steps.json]

No server: the engine that `vllm-omni-mlx serve` runs (worker/text/batch_engine.py, the pacer of
worker/text/prefill_pacing.py), driven step by step as the scheduler drives it. One greedy
stream (greedy requests of `--stream-tokens` tokens, EOS banned, one after another, so its own
context stays short, as in scripts/bench_prefill.py) steps `--alone-steps` times alone, then a `--long`-token
prompt is admitted and the engine steps until that prompt's first token. The stream's
inter-token latency is a step that gave it the next token of the same request; `--streams N`
decodes N - 1 more beside it throughout (the batch's host work per step). Per step it records:

- `wall`: the whole `engine.step()`, which is the stream's inter-token latency in the worker;
- `decode`: mlx-lm's time in the decode step (`GenerationBatch.next`: build the next step's
  graph, start it, wait for this step's tokens);
- `prompt`: its time in the prefill chunk when the chunk is a model call of its own
  (`PromptProcessingBatch.prompt`, synchronous: a step with nothing decoding, or `--unfused`);
  a chunk fused into the decode pass (worker/text/fused_generator.py) counts in `decode`;
- `host`: the rest, our own per-token work (detokenizing, stop strings, parsers, Deltas) and
  the pacer;
- the chunk the pacer chose and the long prompt's progress (its context when the step ran).

It prints p50 / p99 / max of each part, alone and during the prefill, and the slowest steps
taken apart: which part a latency spike comes from (docs/benchmarks.md, "Prefill at agent
sizes").
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from dataclasses import asdict, dataclass

from protocol.inputs import CompleteInputs, SamplingParams
from protocol.messages import Submit
from scripts.bench_agent_session import WORDS
from worker.text.batch_engine import BatchTextEngine
from worker.text.model import load_text_model
from worker.text.prefill_pacing import DEFAULT_RATIO, PrefillPacer
from worker.text.prefix_reuse import PrefixReuse
from worker.text.settings import GenerationSettings


@dataclass
class StepRecord:
    phase: str  # "alone" or "during"
    itl: bool  # the step gave the stream the next token of the request it gave the last one
    wall: float
    decode: float
    prompt: float
    host: float
    chunk: int  # prompt tokens the pacer gave the prefilling request (0: a decode-only probe)
    prefilled: int  # prompt tokens processed in the step
    context: int  # the long prompt's tokens already in its KV cache when the step began


def words(seed: int, count: int) -> str:
    rng = random.Random(seed)
    return f"[{seed}] " + " ".join(rng.choice(WORDS) for _ in range(count))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def profile(
    path: str,
    long_tokens: int,
    alone_steps: int,
    ratio: float,
    stream_tokens: int,
    streams: int,
    host_ms: float = 0.0,
    fuse: bool = True,
) -> list[StepRecord]:
    text_model = load_text_model(path)
    tokenizer = text_model.tokenizer
    settings = GenerationSettings()
    pacer = PrefillPacer(settings.prefill_step_size, ratio)
    engine = BatchTextEngine(text_model, settings, 8, PrefixReuse(None), pacer, fuse)
    chosen = [settings.prefill_step_size]
    plan = pacer.chunk

    def recording(decoding: int, prefilling: int) -> int:
        chosen[0] = plan(decoding, prefilling)
        return chosen[0]

    pacer.chunk = recording  # type: ignore[method-assign]
    ban_eos = {int(t): -100.0 for t in tokenizer.eos_token_ids}
    stream = tokenizer.encode(words(1, 200))
    sampling = SamplingParams(max_tokens=stream_tokens, temperature=0.0, logit_bias=ban_eos)
    streamed = 0  # stream requests so far

    def next_stream() -> str:
        nonlocal streamed
        streamed += 1
        engine.admit(Submit(f"stream-{streamed}", CompleteInputs(stream, sampling), True))
        return f"stream-{streamed}"

    for k in range(streams - 1):  # decoding beside the stream that is timed, never ending
        forever = SamplingParams(max_tokens=10**9, temperature=0.0, logit_bias=ban_eos)
        engine.admit(Submit(f"beside-{k}", CompleteInputs(stream, forever), True))
    current, tokens_of_current = next_stream(), 0
    long_prompt = tokenizer.encode(words(2, int(long_tokens / 1.28)))[:long_tokens]
    counters = engine._generator._counters  # noqa: SLF001 (a profile reads mlx-lm's counters)
    records: list[StepRecord] = []
    phase, done = "alone", 0
    while True:
        if phase == "alone" and done == alone_steps:
            long_sampling = SamplingParams(max_tokens=1, temperature=0.0)
            engine.admit(Submit("long", CompleteInputs(long_prompt, long_sampling), True))
            phase = "during"
            context = 0
        before = (counters.decode_time, counters.prompt_time, counters.prompt_tokens)
        chosen[0] = -1
        start = time.perf_counter()
        deltas = engine.step()
        if host_ms:  # more host work after the step, as a slower detokenizer or parser would add
            until = time.perf_counter() + host_ms / 1000
            while time.perf_counter() < until:
                pass
        wall = time.perf_counter() - start
        decode = counters.decode_time - before[0]
        prompt = counters.prompt_time - before[1]
        prefilled = counters.prompt_tokens - before[2]
        mine = [d for d in deltas if d.request_id == current]
        got = sum(len(d.token_ids) for d in mine)
        records.append(
            StepRecord(phase, got > 0 and tokens_of_current > 0, wall, decode, prompt,
                       wall - decode - prompt, max(chosen[0], 0), prefilled,
                       context if phase == "during" else 0)
        )  # fmt: skip
        tokens_of_current += got
        if any(d.finish_reason for d in mine):
            current, tokens_of_current = next_stream(), 0
        done += 1
        if phase == "during":
            context += prefilled
            if any(d.request_id == "long" and d.finish_reason for d in deltas):
                break
    engine.abort([current, *(f"beside-{k}" for k in range(streams - 1))])
    return records


def summary(records: list[StepRecord]) -> None:
    for phase in ("alone", "during"):
        steps = [r for r in records if r.phase == phase and r.itl]
        print(f"\n{phase}: {len(steps)} inter-token steps of the stream, ms (p50 / p99 / max)")
        for part in ("wall", "decode", "prompt", "host"):
            values = [1000 * getattr(r, part) for r in steps]
            print(f"  {part:7s} {percentile(values, 0.5):8.2f} {percentile(values, 0.99):8.2f} "
                  f"{max(values):8.2f}")  # fmt: skip
        if phase == "during":
            chunks = [r.chunk for r in steps if r.prefilled]
            print(f"  chunks: median {statistics.median(chunks) if chunks else 0}, "
                  f"decode-only probes {sum(1 for r in steps if not r.prefilled)}")  # fmt: skip
    everything = [r for r in records if r.phase == "during"]
    print(f"\nthe long prompt: {sum(r.prefilled for r in everything)} tokens prefilled in "
          f"{sum(r.wall for r in everything):.1f} s over {len(everything)} steps")  # fmt: skip
    during = [r for r in records if r.phase == "during" and r.itl]
    print("\nslowest steps during the prefill (ms): wall = decode + prompt + host")
    for r in sorted(during, key=lambda r: -r.wall)[:12]:
        print(f"  {1000 * r.wall:8.2f} = {1000 * r.decode:7.2f} + {1000 * r.prompt:7.2f} + "
              f"{1000 * r.host:6.2f}   chunk {r.chunk:5d}  context {r.context}")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", help="checkpoint [default: the tiny-64k qwen3 checkpoint]")
    p.add_argument("--size", default="tiny-64k")
    p.add_argument("--long", type=int, default=30000, help="the long prompt's tokens")
    p.add_argument("--alone-steps", type=int, default=400)
    p.add_argument("--ratio", type=float, default=DEFAULT_RATIO, help="--prefill-interleave")
    p.add_argument("--stream-tokens", type=int, default=256,
                   help="tokens of each stream request (more: one request outlasts the prefill)")  # fmt: skip
    p.add_argument("--streams", type=int, default=1, help="streams decoding (one is timed)")
    p.add_argument("--host-ms", type=float, default=0.0,
                   help="CPU work added to every step's host part (is it hidden by the next step?)")  # fmt: skip
    p.add_argument("--unfused", action="store_true",
                   help="chunks as mlx-lm's own model call, not in the decode pass")  # fmt: skip
    p.add_argument("--json", help="write every step's record here")
    args = p.parse_args()
    path = args.model
    if path is None:
        from worker.tiny_models import ensure_checkpoint

        path = str(ensure_checkpoint("qwen3", args.size))
    records = profile(
        path, args.long, args.alone_steps, args.ratio, args.stream_tokens, args.streams,
        args.host_ms, not args.unfused,
    )  # fmt: skip
    summary(records)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in records], f)


if __name__ == "__main__":
    main()
