"""Speech in: real-time factor of a transcription through a server vs direct mlx-audio.

    python -m scripts.bench_stt --model WHISPER_DIR --url http://127.0.0.1:8000 \\
        --audio speech.wav [--language en] [--runs 5]

The server (`vllm-omni-mlx serve WHISPER_DIR`, or any model with `--transcription-model WHISPER_DIR`,
already running at --url) gets the file as an OpenAI transcription upload (json response);
direct runs call `mlx_audio.stt.load(WHISPER_DIR).generate(FILE, language=...)` in this
process, which is what the worker's engine computes, window by window. Runs alternate server /
direct, so both see the same machine state; the medians and their ratio are printed as a
Markdown table row. Real-time factor: wall time / seconds of audio (below 1: faster than real
time); the server's includes the upload, decoding and the HTTP round trip.

Compare like with like: give this process the BLAS the worker has (the worker preloads
OpenBLAS on Linux unless started with `--blas bundled`).
"""

from __future__ import annotations

import argparse
import statistics
import time
import wave
from pathlib import Path

import httpx


def audio_seconds(path: Path) -> float:
    with wave.open(str(path), "rb") as f:
        return f.getnframes() / f.getframerate()


def server_run(
    client: httpx.Client, model: str, path: Path, language: str | None, key: str | None
) -> float:
    """One request on `client`, which keeps its connection (as the SDKs do)."""
    data = {"model": model, **({"language": language} if language else {})}
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    started = time.perf_counter()
    r = client.post(
        "/v1/audio/transcriptions",
        data=data,
        files={"file": (path.name, path.read_bytes())},
        headers=headers,
        timeout=3600,
    )
    r.raise_for_status()
    return time.perf_counter() - started


def direct_run(model, path: Path, language: str | None) -> float:
    started = time.perf_counter()
    model.generate(str(path), language=language)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="the Whisper checkpoint the server has")
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--audio", required=True, type=Path, help="a WAV file")
    parser.add_argument("--language", default=None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--served-name", default="whisper-1", help="`model` of the requests")
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args()

    import mlx_audio.stt

    model = mlx_audio.stt.load(args.model)
    seconds = audio_seconds(args.audio)
    client = httpx.Client(base_url=args.url.rstrip("/"), timeout=3600)
    # One warm-up each: first-call compilation and caches count for neither side.
    server_run(client, args.served_name, args.audio, args.language, args.api_key)
    direct_run(model, args.audio, args.language)
    server, direct = [], []
    for _ in range(args.runs):
        server.append(server_run(client, args.served_name, args.audio, args.language, args.api_key))
        direct.append(direct_run(model, args.audio, args.language))
    rtf_server = statistics.median(server) / seconds
    rtf_direct = statistics.median(direct) / seconds
    print("| model | audio | runs | RTF direct | RTF server | RTF ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(
        f"| {Path(args.model).name} | {seconds:.1f} s | {args.runs} | {rtf_direct:.3f} | "
        f"{rtf_server:.3f} | {rtf_server / rtf_direct:.3f} |"
    )
    print(f"server runs (s): {', '.join(f'{t:.2f}' for t in server)}")
    print(f"direct runs (s): {', '.join(f'{t:.2f}' for t in direct)}")


if __name__ == "__main__":
    main()
