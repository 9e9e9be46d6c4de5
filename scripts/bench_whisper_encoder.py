"""Whisper on a CPU: the stock encoder against its attention heads on two MLX streams.

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libopenblas.so.0 python -m scripts.bench_whisper_encoder \\
        --model $(python -m worker.convert.packages whisper-tiny.en) [--runs 5]

Two copies of the checkpoint built in float32 as the worker builds it (`--dtype float32`, the
default's), one left stock and one given worker/transcription/whisper_fast.py; runs alternate
between them. Times: one 30-second window through the encoder, and a whole transcription of a
spoken sentence (espeak-ng, resampled to 16 kHz) with mlx-audio's `generate`. Prints medians,
their ratio, and whether the outputs are equal (they must be, bit for bit).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

import numpy as np

SENTENCE = "Can you tell me a short story about the sea?"


def spoken(text: str) -> np.ndarray:
    """espeak-ng's voice for `text` at 16 kHz, float32."""
    import io
    import wave

    from scipy.signal import resample_poly

    wav = subprocess.run(["espeak-ng", "--stdout", text], capture_output=True, check=True).stdout
    with wave.open(io.BytesIO(wav)) as f:
        rate = f.getframerate()
        pcm = np.frombuffer(f.readframes(f.getnframes()), np.int16).astype(np.float32) / 32768
    return resample_poly(pcm, 16000, rate).astype(np.float32)


def load(path: str, fast: bool):
    import mlx.core as mx
    from mlx_audio.stt import load as load_stt

    from worker.transcription import whisper_fast
    from worker.transcription.whisper import build_in_float32

    model = load_stt(path, lazy=True)
    build_in_float32(model, path)
    if fast and not whisper_fast.install(model):
        raise SystemExit("whisper_fast.install changed nothing (not on the CPU?)")
    mx.eval(model.parameters())
    return model


def encoded(model, mel):
    import mlx.core as mx

    out = model.encoder(mel)
    mx.eval(out)
    return out


def timed(run) -> tuple[float, object]:
    started = time.perf_counter()
    out = run()
    return time.perf_counter() - started, out


def main() -> None:
    import mlx.core as mx

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--runs", type=int, default=5, choices=range(1, 101), metavar="1-100")
    args = parser.parse_args()
    models = {"stock": load(args.model, False), "two streams": load(args.model, True)}
    mel = mx.random.normal((1, 3000, 80), key=mx.random.key(0))
    audio = spoken(SENTENCE)
    times: dict[str, dict[str, list[float]]] = {k: {"encoder": [], "generate": []} for k in models}
    outputs: dict[str, tuple] = {}
    for round_ in range(args.runs + 1):  # the first round warms up, and is not counted
        order = list(models.items())
        for name, model in order if round_ % 2 else reversed(order):  # alternate who goes first
            encoder_s, encoding = timed(lambda m=model: encoded(m, mel))
            generate_s, result = timed(lambda m=model: m.generate(audio, fp16=False))
            times[name]["encoder"].append(encoder_s)
            times[name]["generate"].append(generate_s)
            outputs[name] = (encoding, result.text)
    print("| | encoder (30 s window) | transcription of a 2.5 s sentence |")
    print("| --- | --- | --- |")
    for name in models:
        enc, gen = (statistics.median(times[name][k][1:]) for k in ("encoder", "generate"))
        print(f"| {name} | {enc * 1000:.0f} ms | {gen * 1000:.0f} ms |")
    stock, fast = (times[name] for name in models)
    ratio = [
        statistics.median(fast[k][1:]) / statistics.median(stock[k][1:])
        for k in ("encoder", "generate")
    ]
    print(f"| two streams / stock | {ratio[0]:.2f} | {ratio[1]:.2f} |")
    (encoded_a, text_a), (encoded_b, text_b) = outputs.values()
    print("encoder output equal:", mx.array_equal(encoded_a, encoded_b).item())
    print("transcripts equal:", text_a == text_b, repr(text_b))


if __name__ == "__main__":
    main()
