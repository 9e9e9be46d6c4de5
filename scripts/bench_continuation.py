"""What a Qwen3-TTS phrase pays for going on from the phrase before (worker/speech/
continuation.py): its time to first audio and its real-time factor, continued vs alone.

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libopenblas.so.0 OPENBLAS_THREAD_TIMEOUT=4 \
        python -m scripts.bench_continuation --model TTS_DIR [--runs 3] [--voice ryan]

In this process, through the worker's speech engine (as the worker runs it: voice cache,
compiled code predictor, staged codec): the first phrase is spoken once for its context, then
the second phrase is spoken alone and continued, alternately, `--runs` times each with the same
seeds. A continued phrase prefills the previous phrase's text and frames too; the first
phrase, the one a listener waits for, never does. Medians, as a Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import time

FIRST = "The quick brown fox jumps over the lazy dog,"
SECOND = "and it was a bright cold day in April."


def timed(engine, submit) -> tuple[float, float, float]:
    """(first audio, total, seconds of audio) of one request run to its end alone."""
    started = time.perf_counter()
    first, samples = None, 0
    engine.admit(submit)
    while engine.active_ids():
        for delta in engine.step():
            if delta.audio:
                first = first or time.perf_counter() - started
                samples += len(delta.audio) // 2
    total = time.perf_counter() - started
    return first or total, total, samples / engine.sample_rate


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a Qwen3-TTS checkpoint")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--voice", default="ryan")
    args = parser.parse_args(argv)

    from protocol.inputs import SpeechInputs
    from protocol.messages import Submit
    from worker.speech.engine import load_tts_engine

    engine = load_tts_engine(args.model)

    def submit(text: str, seed: int, context: bytes | None = None) -> Submit:
        inputs = SpeechInputs(text, voice=args.voice, seed=seed, context=context)
        return Submit(f"r{seed}{context is None}", inputs, True)

    engine.admit(submit(FIRST, 1))
    context = b""
    while engine.active_ids():
        for delta in engine.step():
            context = delta.speech_context or context
    assert context, "the first phrase handed no context back"
    timed(engine, submit(SECOND, 99))  # warm: the voice's prefix kept, the compiled steps traced
    alone, continued = [], []
    for seed in range(2, 2 + args.runs):
        alone.append(timed(engine, submit(SECOND, seed)))
        continued.append(timed(engine, submit(SECOND, seed, context)))

    def median(runs: list[tuple[float, float, float]], key: int) -> float:
        return statistics.median(r[key] for r in runs)

    print(f"model {args.model}, voice {args.voice}, {args.runs} runs each, medians")
    print("| the second phrase | first audio | real-time factor | audio |")
    print("| --- | --- | --- | --- |")
    for name, runs in (("alone", alone), ("continued from the first", continued)):
        rtf = statistics.median(total / seconds for _, total, seconds in runs)
        print(f"| {name} | {median(runs, 0) * 1000:.0f} ms | {rtf:.3f} | {median(runs, 2):.2f} s |")


if __name__ == "__main__":
    main()
