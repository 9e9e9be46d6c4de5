"""A TTS model as the HTTP tests' fake engine shows it: its Ready section and scripted audio."""

from __future__ import annotations

from protocol.messages import Delta, Usage
from protocol.ready import SpeechInfo, Voice
from tests.support.fake_engine import accepted

RATE = 8000
AUDIO = SpeechInfo(
    model="tiny-tts",
    model_path="/models/tiny-tts",
    family="qwen3_tts",
    voices=[Voice("ryan"), Voice("vivian")],
    cloning=False,
    ref_text=False,
    descriptions=False,
    instructions=True,
    languages=["auto", "english"],
    speed=False,
    streaming=True,
    sample_rate=RATE,
)
PCM = [bytes(range(100)) * 8, bytes(range(50, 150)) * 8]
BODY = {"model": "tiny-tts", "input": "Hello there.", "voice": "ryan", "response_format": "wav"}


def speech_script(*chunks: bytes, usage: Usage | None = None) -> list:
    audio = [[Delta("r", audio=c, sample_rate=RATE)] for c in chunks]
    end = [Delta("r", finish_reason="stop", usage=usage or Usage(12, 6))]
    return [accepted(), *audio, end]
