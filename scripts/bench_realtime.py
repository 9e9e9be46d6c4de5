"""Realtime voice turn: from the end of the user's speech to the first response audio, split
by stage, against the three legs measured directly.

    python -m scripts.bench_realtime [--model PATH] [--tts PATH] [--asr PATH] [--rounds 5]

One server (`serve MODEL --speech-model TTS --transcription-model ASR --dtype float32`). Each round:

1. a realtime session (the openai SDK's client, server VAD with its defaults) hears an
   espeak-ng question sent at real-time pace in 100 ms appends. Measured from the moment the
   append holding the speech's last loud sample is sent: `speech_stopped` (the VAD waiting
   out its 500 ms of silence), the input transcription's `completed` (ASR), the first
   transcript delta (the chat's first token), the first audio delta (the first phrase
   written and its TTS first audio);
2. the same legs directly, one after the other: the turn's audio from `speech_started`'s
   `audio_start_ms` to 200 ms into its closing silence (the audio the session transcribes)
   to /v1/audio/transcriptions; the chat with that transcript as its user message, streamed,
   until its first phrase is complete; that phrase to /v1/audio/speech, streamed, until its
   first bytes.

Prints medians, and (speech_stopped -> first audio) / (ASR + first phrase + TTS first audio):
1.0 means the pipeline adds nothing between the stages and gains nothing; under 1.0, the
transcription begun while the VAD waited out the rest of the silence (gateway/api/realtime/transcription.py)
saved that much. Defaults: the real SmolLM2 and
Whisper tiny.en when converted in the cache (python -m worker.convert.packages KEY), else the tiny
random ones; the tiny Qwen3-TTS.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from openai import AsyncOpenAI

from gateway.api.realtime.pcm import wav_file
from gateway.api.realtime.transcription import speech_cut_ms
from gateway.api.realtime.vad import WINDOW_MS
from scripts.bench_audio_out import first_phrase, tts_first_audio
from scripts.bench_pool import default_model
from tests.support.server import ServerProcess
from tests.support.spoken import loud_span_ms, pcm24k
from worker.tiny_models import ensure_checkpoint

QUESTION = "Can you tell me a short story about the sea?"
STEP_MS = 100
TOKENS = 96  # the answer's length, both ways


def default_asr() -> str:
    root = Path(os.environ.get("VOMLX_CACHE_DIR", Path.home() / ".cache/vllm-omni-mlx"))
    found = sorted((root / "converted").glob("whisper-tiny.en-*"))
    return str(found[-1]) if found else str(ensure_checkpoint("whisper"))


async def realtime_turn(url: str, model: str, pcm: bytes) -> dict:
    """Seconds from the end of speech to each stage's first event, and the turn's audio."""
    _, end_ms = loud_span_ms(pcm)
    marks: dict = {}
    client = AsyncOpenAI(base_url=f"{url}/v1", api_key="none")
    async with client.realtime.connect(model=model) as conn:
        await conn.session.update(session={"type": "realtime", "max_output_tokens": TOKENS, "temperature": 0,
            "audio": {"input": {"transcription": {"model": "whisper-1", "language": "en"}}}})  # fmt: skip

        async def send() -> None:
            step = 48 * STEP_MS
            for at in range(0, len(pcm), step):
                await conn.input_audio_buffer.append(
                    audio=base64.b64encode(pcm[at : at + step]).decode()
                )
                if at <= end_ms * 48 < at + step:
                    marks["end"] = time.perf_counter()
                await asyncio.sleep(STEP_MS / 1000)

        sender = asyncio.ensure_future(send())
        names = {"input_audio_buffer.speech_started": "started",
                 "input_audio_buffer.speech_stopped": "stopped",
                 "conversation.item.input_audio_transcription.completed": "asr",
                 "response.output_audio_transcript.delta": "first_text",
                 "response.output_audio.delta": "first_audio"}  # fmt: skip
        async for event in conn:
            now = time.perf_counter()
            key = names.get(event.type)
            if key is not None and key not in marks:
                marks[key] = now
                marks[f"{key}_event"] = event
            if event.type == "error":
                raise RuntimeError(event.error)
            if event.type == "response.done":
                break
        await sender
    start_ms = marks["started_event"].audio_start_ms
    # The VAD counts the default 500 ms of silence in whole windows: the silence began that long
    # before `audio_end_ms`, and the session transcribes the turn up to 200 ms into it.
    silence_start_ms = marks["stopped_event"].audio_end_ms - -(-500 // WINDOW_MS) * WINDOW_MS
    speech_end_ms = speech_cut_ms(silence_start_ms, 500)
    return {
        "vad": marks["stopped"] - marks["end"],
        "asr": marks["asr"] - marks["stopped"],
        "chat_first_token": marks["first_text"] - marks["asr"],
        "first_audio": marks["first_audio"] - marks["asr"],
        "stopped_to_audio": marks["first_audio"] - marks["stopped"],
        "total": marks["first_audio"] - marks["end"],
        "turn": pcm[start_ms * 48 : speech_end_ms * 48],
        "transcript": marks["asr_event"].transcript,
    }


def direct_legs(client: httpx.Client, model: str, tts: str, turn: bytes) -> dict:
    started = time.perf_counter()
    r = client.post("/v1/audio/transcriptions", data={"model": "whisper-1", "language": "en"},
                    files={"file": ("turn.wav", wav_file(turn))})  # fmt: skip
    r.raise_for_status()
    asr = time.perf_counter() - started
    messages = [{"role": "user", "content": r.json()["text"].strip()}]
    phrase_s, phrase = first_phrase(client, model, TOKENS, messages)
    return {"asr": asr, "phrase": phrase_s, "tts": tts_first_audio(client, tts, "alloy", phrase)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--tts", default=None)
    parser.add_argument("--asr", default=None)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    chat_path = args.model or default_model()
    tts_path = args.tts or str(ensure_checkpoint("qwen3_tts"))
    asr_path = args.asr or default_asr()
    pcm = pcm24k(QUESTION)
    with tempfile.TemporaryDirectory() as tmp:
        serve = [
            chat_path,
            "--speech-model",
            tts_path,
            "--transcription-model",
            asr_path,
            "--dtype",
            "float32",
        ]
        server = ServerProcess(serve, Path(tmp) / "server.log")
        try:
            server.wait_healthy()
            client = httpx.Client(base_url=server.url, timeout=600)
            model, tts = Path(chat_path).name, Path(tts_path).name
            asyncio.run(realtime_turn(server.url, model, pcm))  # warm-up
            rows = []
            for _ in range(args.rounds):
                turn = asyncio.run(realtime_turn(server.url, model, pcm))
                rows.append((turn, direct_legs(client, model, tts, turn["turn"])))
        finally:
            server.stop()
    med = lambda f: statistics.median(f(t, d) for t, d in rows)  # noqa: E731
    print(f"{model} + {Path(asr_path).name} + {tts}, {args.rounds} rounds, medians (s)")
    print(f"heard: {rows[0][0]['transcript']!r}")
    print("| end of speech -> stopped (VAD) | -> transcript (ASR) | -> first text | "
          "-> first audio | end of speech -> first audio |")  # fmt: skip
    print("| --- | --- | --- | --- | --- |")
    print(f"| {med(lambda t, d: t['vad']):.3f} | {med(lambda t, d: t['asr']):.3f} | "
          f"{med(lambda t, d: t['chat_first_token']):.3f} | {med(lambda t, d: t['first_audio']):.3f} | "
          f"{med(lambda t, d: t['total']):.3f} |")  # fmt: skip
    legs = med(lambda t, d: d["asr"] + d["phrase"] + d["tts"])
    ours = med(lambda t, d: t["stopped_to_audio"])
    print("| stopped -> first audio | direct: ASR | first phrase | TTS first audio | ratio |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| {ours:.3f} | {med(lambda t, d: d['asr']):.3f} | {med(lambda t, d: d['phrase']):.3f} "
          f"| {med(lambda t, d: d['tts']):.3f} | {ours / legs:.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
