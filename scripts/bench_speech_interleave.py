"""Chat latency while speech is generated: in the same worker, or in workers of their own.

    python -m scripts.bench_speech_interleave [--rounds 7] [--tts-size long] [--blas auto]
        [--shape one-worker | pool]

Starts the real server (`vllm-omni-mlx serve QWEN3 --speech-model TTS`: the tiny random-weight
qwen3 chat checkpoint with the tiny Qwen3-TTS CustomVoice next to it, both built by
worker/tiny_models/ on first use), then times a 16-token greedy chat completion (non-streamed,
one kept-alive client):
- alone: the median of `--rounds` requests with nothing else running;
- during speech: `--rounds` times, a streamed PCM speech request is started; once its first
  audio arrived (plus `--lead` seconds) the speech runs alone for `--window` seconds, then the
  same chat is sent (the timed one), then chats follow back to back for another `--window`
  seconds, and the speech request is closed (the server aborts it). The `long` TTS checkpoint
  speaks for 2,000 codec frames (minutes), so the speech always outlasts the chats.

Prints the chat's medians (alone, during speech) and their ratio, and the speech's audio rate
(seconds of audio received per second) in the window alone and in the window with chats: what
the chats cost the speech. `--shape one-worker` (the default): both run on the worker's one
MLX thread (worker/runtime/scheduler.py). `--shape pool`: the same two checkpoints from a
models file (`serve --models`, docs/models.md), each in a worker process of its own, so they
compete only for the machine's cores.
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

from tests.support.server import ServerProcess
from worker.tiny_models import ensure_checkpoint

CHAT_TOKENS = 16
SPEECH_TEXT = "The quick brown fox jumps over the lazy dog. It was a bright cold day in April."


class Speech(threading.Thread):
    """One streamed speech request, read until `stop` is set (then the connection closes)."""

    def __init__(self, url: str, model: str, voice: str) -> None:
        super().__init__(daemon=True)
        self.url, self.model, self.voice = url, model, voice
        self.first_audio = threading.Event()
        self.stop = threading.Event()
        self.bytes = 0
        self.marks: list[tuple[float, int]] = []  # (time, bytes so far) at each chunk
        self.error: BaseException | None = None

    def run(self) -> None:
        body = {
            "model": self.model,
            "input": SPEECH_TEXT,
            "voice": self.voice,
            "response_format": "pcm",
            "stream": True,
            "seed": 1,
        }
        try:
            with httpx.Client(base_url=self.url, timeout=600) as client:
                with client.stream("POST", "/v1/audio/speech", json=body) as response:
                    response.raise_for_status()
                    for chunk in response.iter_raw():
                        self.bytes += len(chunk)
                        self.marks.append((time.perf_counter(), self.bytes))
                        if chunk:
                            self.first_audio.set()
                        if self.stop.is_set():
                            break
        except BaseException as exc:  # reported by the caller
            self.error = exc
        finally:
            self.first_audio.set()

    def audio_seconds_between(self, start: float, end: float, rate: int) -> float:
        """Seconds of audio (int16 mono) that arrived between two perf_counter times."""
        before = max((b for t, b in self.marks if t <= start), default=0)
        after = max((b for t, b in self.marks if t <= end), default=0)
        return (after - before) / 2 / rate


def chat(client: httpx.Client, model: str) -> tuple[float, int]:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Tell me a story about a fox."}],
        "max_tokens": CHAT_TOKENS,
        "temperature": 0,
    }
    started = time.perf_counter()
    response = client.post("/v1/chat/completions", json=body)
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    return elapsed, response.json()["usage"]["completion_tokens"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tts-size", default="long", help="size of the qwen3_tts checkpoint")
    parser.add_argument("--voice", default="ryan")
    parser.add_argument("--lead", type=float, default=0.3, help="s after first audio to start")
    parser.add_argument("--window", type=float, default=3.0, help="s of each speech-rate window")
    parser.add_argument("--blas", default="auto", help="the server's --blas")
    parser.add_argument("--json", action="store_true", help="print the raw times as JSON too")
    parser.add_argument("--shape", choices=("one-worker", "pool"), default="one-worker")
    args = parser.parse_args(argv)

    chat_path = ensure_checkpoint("qwen3")
    tts_path = ensure_checkpoint("qwen3_tts", args.tts_size)
    tmp = Path(tempfile.mkdtemp(prefix="bench_interleave."))
    if args.shape == "pool":
        models = tmp / "models.yaml"
        models.write_text(
            f"models:\n  - {{id: {chat_path.name}, path: {chat_path}, preload: true}}\n"
            f"  - {{id: {tts_path.name}, path: {tts_path}, kind: speech, preload: true}}\n"
        )
        serve = ["--models", str(models), "--blas", args.blas]
    else:
        serve = [str(chat_path), "--speech-model", str(tts_path), "--blas", args.blas]
    server = ServerProcess(serve, tmp / "server.log", api_key=None)
    try:
        server.wait_healthy()
        client = httpx.Client(base_url=server.url, timeout=600)
        chat_model, speech_model = chat_path.name, tts_path.name
        rate = client.get("/v1/audio/voices", params={"model": speech_model}).json()["sample_rate"]

        for _ in range(3):  # untimed: first-call compilation, allocations, the connection
            chat(client, chat_model)
        warm = Speech(server.url, speech_model, args.voice)
        warm.start()
        warm.first_audio.wait(120)
        warm.stop.set()
        warm.join(60)
        time.sleep(1.0)

        alone, tokens = [], set()
        for _ in range(args.rounds):
            elapsed, n = chat(client, chat_model)
            alone.append(elapsed)
            tokens.add(n)

        during, rates_alone, rates_chat = [], [], []
        for _ in range(args.rounds):
            speech = Speech(server.url, speech_model, args.voice)
            speech.start()
            if not speech.first_audio.wait(120) or speech.error is not None:
                raise SystemExit(f"speech request failed: {speech.error!r}")
            time.sleep(args.lead)
            quiet = time.perf_counter()
            time.sleep(args.window)
            started = time.perf_counter()
            elapsed, n = chat(client, chat_model)
            during.append(elapsed)
            tokens.add(n)
            while time.perf_counter() - started < args.window:
                chat(client, chat_model)
            ended = time.perf_counter()
            rates_alone.append(
                speech.audio_seconds_between(quiet, started, rate) / (started - quiet)
            )
            rates_chat.append(
                speech.audio_seconds_between(started, ended, rate) / (ended - started)
            )
            speech.stop.set()
            speech.join(60)
            if speech.error is not None:
                raise SystemExit(f"speech request failed: {speech.error!r}")
            time.sleep(1.0)  # the abort reaches the worker; the next round starts from idle
    finally:
        server.stop()

    alone_ms = statistics.median(alone) * 1000
    during_ms = statistics.median(during) * 1000
    print(
        f"{CHAT_TOKENS}-token greedy chat ({chat_path.name}, completion tokens {sorted(tokens)}) "
        f"next to {tts_path.name} speech ({args.shape}), {args.rounds} rounds, medians"
    )
    print(
        "| chat alone | chat during speech | ratio "
        "| speech audio s/s, alone | speech audio s/s, with chats |"
    )
    print("| --- | --- | --- | --- | --- |")
    print(
        f"| {alone_ms:.0f} ms | {during_ms:.0f} ms | {during_ms / alone_ms:.1f}x "
        f"| {statistics.median(rates_alone):.2f} | {statistics.median(rates_chat):.2f} |"
    )
    if args.json:
        raw = {"alone": alone, "during": during, "rates_alone": rates_alone}
        print(json.dumps({**raw, "rates_chat": rates_chat}))


if __name__ == "__main__":
    main()
