"""Speech out: time to first audio and real-time factor, through a server vs direct mlx-audio
(and, for Kokoro, vs onnxruntime on the int8 ONNX export it was converted from).

    python -m scripts.bench_speech --model TTS_DIR --url http://127.0.0.1:8000 [--runs 5]
        [--onnx kokoro-v1.0.int8.onnx] [--intervals 0.16,2.0] [--stock [--stock-runs N]]

The server (`vllm-omni-mlx serve TTS_DIR --omni`, already running at --url) is asked for a
streamed PCM response; direct runs call the same `model.generate(**kwargs)` the worker's engine
makes (TtsEngine.generate_kwargs) in this process. Runs alternate server / direct with the same
seeds, so both see the same machine state; the medians and their ratios are printed as a
Markdown table. Time to first audio: from the call to the first audio bytes (server: the first
body bytes after the headers; direct: the first chunk mlx-audio yields). Real-time factor:
wall time / seconds of audio (below 1: faster than real time). `--intervals` adds direct runs
of a streaming family at other `streaming_interval`s (Qwen3-TTS: the worker's earlier 0.16 s,
mlx-audio's own default 2.0 s), in the same alternation.

Compare like with like: give this process the BLAS the worker has (the worker preloads
OpenBLAS on Linux unless started with `--blas bundled`; start this with the same LD_PRELOAD).

Direct runs of Qwen3-TTS run mlx-audio's own code predictor (the worker compiles its step:
worker/speech/qwen3_compiled.py) and its codec a frame at a time (the worker groups frames into
growing chunks: worker/speech/staged.py CHUNK_FRAMES), with the codec's faster CPU forms.
`--stock` adds direct runs with mlx-audio's own decoder too: the worker's faster CPU forms of
the decoder's convolutions and `sin` taken out (Kokoro: worker/speech/kokoro_fast.py; Qwen3-TTS:
worker/speech/qwen3_codec_fast.py), i.e. the library as a caller runs it, after the others.

Kokoro's direct runs are the worker's own path (worker/speech/kokoro_speaker.py: its text front
end, mlx-audio's model per chunk, the fast CPU operations). `--onnx` adds onnxruntime (the
peer a Kokoro user would otherwise run: kokoro-onnx) on the same phoneme chunks, voice pack
and speed, with its default threads; `python -m tests.support.kokoro_onnx` fetches the export
Kokoro-82M was converted from and prints its path.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx

TEXT = "The quick brown fox jumps over the lazy dog. It was a bright cold day in April."


@dataclass
class Run:
    first_audio: float  # seconds
    total: float  # seconds
    audio_seconds: float

    @property
    def rtf(self) -> float:
        return self.total / self.audio_seconds


def direct_run(
    engine, seed: int, text: str, voice: str | None, interval: float | None = None
) -> Run:
    import mlx.core as mx

    from worker.speech.families import SpeechRequest, check_voice

    request = SpeechRequest(text=text, voice=voice)
    voice = check_voice(engine.family, engine.voices, request)
    kwargs = engine.generate_kwargs(SpeechRequest(text=text, voice=voice))
    if interval is not None:
        kwargs["streaming_interval"] = interval
    mx.random.seed(seed)
    started = time.perf_counter()
    first, samples = None, 0
    with library_predictor(engine):
        for result in engine.family.generate(engine.model, kwargs):
            mx.eval(result.audio)
            if first is None and result.audio.size:
                first = time.perf_counter() - started
            samples += result.audio.size
    total = time.perf_counter() - started
    return Run(first or total, total, samples / engine.sample_rate)


def onnx_run(session, engine, text: str, voice: str | None) -> Run:
    """onnxruntime on the phoneme chunks the worker's Kokoro speaks (its first audio: the
    first chunk's)."""
    import numpy as np

    speaker = engine.model.vomlx_speaker
    voice = voice or speaker.default_voice
    pack = np.asarray(speaker.pack(voice))
    vocab = engine.model.vocab
    started = time.perf_counter()
    first, samples = None, 0
    for phonemes in speaker.phoneme_chunks(text, speaker.language_for(voice, None)):
        ids = [vocab[p] for p in phonemes if p in vocab]
        feeds = {
            "tokens": np.array([[0, *ids, 0]], np.int64),
            "style": pack[len(phonemes) - 1].reshape(1, -1).astype(np.float32),
            "speed": np.array([1.0], np.float32),
        }
        audio = session.run(None, feeds)[0]
        if first is None:
            first = time.perf_counter() - started
        samples += audio.size
    total = time.perf_counter() - started
    return Run(first or total, total, samples / engine.sample_rate)


def server_run(
    client: httpx.Client, model: str, seed: int, text: str, voice: str | None, rate: int
) -> Run:
    """One streamed request on `client`, which keeps its connection (as the SDKs do): a new
    client per request would time the client's own set-up (tens of ms) as the server's."""
    body = {"model": model, "input": text, "response_format": "pcm", "stream": True, "seed": seed}
    if voice:
        body["voice"] = voice
    started = time.perf_counter()
    first, size = None, 0
    with client.stream("POST", "/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        for chunk in response.iter_raw():
            if chunk and first is None:
                first = time.perf_counter() - started
            size += len(chunk)
    total = time.perf_counter() - started
    return Run(first or total, total, size / 2 / rate)


def library_predictor(engine) -> contextlib.AbstractContextManager[None]:
    """A Qwen3-TTS's code predictor as mlx-audio runs it (the worker's is compiled:
    worker/speech/qwen3_compiled.py); nothing to take out for the other families."""
    from worker.speech.qwen3_compiled import uninstalled

    if engine.family.name != "qwen3_tts":
        return contextlib.nullcontext()
    return uninstalled(engine.model)


@contextlib.contextmanager
def stock_decoder(engine) -> Iterator[None]:
    """mlx-audio's own decoder while inside (the worker's faster CPU forms taken out). The
    streamed path only: a non-streamed decode mlx-audio already compiled keeps its trace."""
    from worker.speech import kokoro_fast, qwen3_codec_fast
    from worker.speech.staged import unwrap_decoder

    if engine.family.name == "kokoro":
        uninstall, install = kokoro_fast.uninstall, kokoro_fast.install
    elif engine.family.name == "qwen3_tts":
        decoder = unwrap_decoder(engine.model.speech_tokenizer.decoder)
        uninstall = lambda: qwen3_codec_fast.uninstall(decoder)  # noqa: E731
        install = lambda: qwen3_codec_fast.install(decoder)  # noqa: E731
    else:
        raise SystemExit(f"--stock: {engine.family.label} has no faster forms to take out")
    uninstall()
    try:
        yield
    finally:
        install()


def median(runs: list[Run], key: str) -> float:
    return statistics.median(getattr(r, key) for r in runs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="the TTS checkpoint the server serves")
    parser.add_argument("--url", required=True, help="base URL of the running server")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--text", default=TEXT)
    parser.add_argument("--voice", default=None)
    parser.add_argument("--json", action="store_true", help="print the raw runs as JSON too")
    parser.add_argument("--onnx", default=None, help="Kokoro: its int8 ONNX export (onnxruntime)")
    parser.add_argument(
        "--stock",
        action="store_true",
        help="also direct runs with mlx-audio's own decoder (the worker's faster CPU forms taken "
        "out: Kokoro's worker/speech/kokoro_fast.py, Qwen3-TTS's qwen3_codec_fast.py)",
    )
    parser.add_argument("--stock-runs", type=int, default=1, help="with --stock: how many")
    parser.add_argument(
        "--intervals",
        default="",
        help="streaming families: also direct runs at these streaming_intervals (comma-separated "
        "seconds)",
    )
    args = parser.parse_args(argv)
    intervals = [float(x) for x in args.intervals.split(",") if x]

    from worker.speech.engine import load_tts_engine

    engine = load_tts_engine(args.model)
    client = httpx.Client(base_url=args.url.rstrip("/"), timeout=600)
    voices = client.get("/v1/audio/voices").json()
    model, rate = voices["model"], voices["sample_rate"]
    # One untimed run each: compile caches, first-call allocations, the connection.
    direct_run(engine, 0, args.text, args.voice)
    server_run(client, model, 0, args.text, args.voice, rate)
    session = None
    if args.onnx:
        import onnxruntime

        session = onnxruntime.InferenceSession(args.onnx, providers=["CPUExecutionProvider"])
        onnx_run(session, engine, args.text, args.voice)
    server, direct, onnx = [], [], []
    other: dict[float, list[Run]] = {interval: [] for interval in intervals}
    for seed in range(1, args.runs + 1):
        server.append(server_run(client, model, seed, args.text, args.voice, rate))
        direct.append(direct_run(engine, seed, args.text, args.voice))
        for interval, runs in other.items():
            runs.append(direct_run(engine, seed, args.text, args.voice, interval))
        if session is not None:
            onnx.append(onnx_run(session, engine, args.text, args.voice))

    ttfa_s, ttfa_d = median(server, "first_audio"), median(direct, "first_audio")
    rtf_s, rtf_d = median(server, "rtf"), median(direct, "rtf")
    print(f"model {model} ({engine.family.name}, {rate} Hz), {args.runs} runs each, medians")
    print("| | direct mlx-audio | server | server - direct | server / direct |")
    print("| --- | --- | --- | --- | --- |")
    print(
        f"| time to first audio | {ttfa_d * 1000:.0f} ms | {ttfa_s * 1000:.0f} ms "
        f"| {(ttfa_s - ttfa_d) * 1000:+.0f} ms | {ttfa_s / ttfa_d:.2f} |"
    )
    print(f"| real-time factor | {rtf_d:.3f} | {rtf_s:.3f} | | {rtf_s / rtf_d:.2f} |")
    print(
        f"| audio per request | {median(direct, 'audio_seconds'):.2f} s | "
        f"{median(server, 'audio_seconds'):.2f} s | | |"
    )
    if other:
        print()
        print(
            "| direct at streaming_interval | first audio | real-time factor | server / it: first "
            "audio | server / it: RTF |"
        )
        print("| --- | --- | --- | --- | --- |")
        for interval, runs in other.items():
            ttfa_i, rtf_i = median(runs, "first_audio"), median(runs, "rtf")
            print(
                f"| {interval:g} s | {ttfa_i * 1000:.0f} ms | {rtf_i:.3f} | "
                f"{ttfa_s / ttfa_i:.2f} | {rtf_s / rtf_i:.2f} |"
            )
    if onnx:
        ttfa_o, rtf_o = median(onnx, "first_audio"), median(onnx, "rtf")
        print()
        print("| | onnxruntime (int8 ONNX) | direct | server | server / onnxruntime |")
        print("| --- | --- | --- | --- | --- |")
        print(
            f"| time to first audio | {ttfa_o * 1000:.0f} ms | {ttfa_d * 1000:.0f} ms "
            f"| {ttfa_s * 1000:.0f} ms | {ttfa_s / ttfa_o:.2f} |"
        )
        print(
            f"| real-time factor | {rtf_o:.3f} | {rtf_d:.3f} | {rtf_s:.3f} | {rtf_s / rtf_o:.2f} |"
        )
    if args.stock:
        stock = []
        for seed in range(1, args.stock_runs + 1):
            with stock_decoder(engine):
                stock.append(direct_run(engine, seed, args.text, args.voice))
        ttfa_k, rtf_k = median(stock, "first_audio"), median(stock, "rtf")
        print()
        print(
            f"| | stock mlx-audio decoder ({len(stock)} runs) | direct | server | server / stock |"
        )
        print("| --- | --- | --- | --- | --- |")
        print(
            f"| time to first audio | {ttfa_k * 1000:.0f} ms | {ttfa_d * 1000:.0f} ms "
            f"| {ttfa_s * 1000:.0f} ms | {ttfa_s / ttfa_k:.2f} |"
        )
        print(
            f"| real-time factor | {rtf_k:.3f} | {rtf_d:.3f} | {rtf_s:.3f} | {rtf_s / rtf_k:.2f} |"
        )
    if args.json:
        runs = {"server": server, "direct": direct, "onnxruntime": onnx}
        print(json.dumps({name: [vars(r) for r in found] for name, found in runs.items()}))


if __name__ == "__main__":
    main()
