"""Text spoken phrase by phrase: `Phrases` cuts streamed text into phrases (a sentence end, a
line end, or `MAX_PHRASE_CHARS` cut at a space), `Voice` is what each phrase's speech request
carries but its text, and `speak` runs one phrase's speech request. Shared by chat completions'
audio out (gateway/api/chat_completions/audio_out.py), the speech WebSocket and the Realtime
API's responses.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

from msgspec.structs import replace

from gateway.http import errors
from gateway.workers.protocol import EngineClient
from protocol.inputs import SpeechInputs
from protocol.messages import Delta

MAX_PHRASE_CHARS = 160
# A sentence end followed by a space (so "3.14" or "..." still being written does not cut), or
# a line end.
_PHRASE_END = re.compile(r"[.!?;:\u3002\uff01\uff1f]+[\"')\]]*\s|\n")


class Phrases:
    """Text in as it streams; complete phrases out, in order."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, text: str) -> list[str]:
        self._pending += text
        out = []
        while True:
            end = _PHRASE_END.search(self._pending)
            if end is not None:
                cut = end.end()
            elif len(self._pending) > MAX_PHRASE_CHARS:
                cut = self._pending.rfind(" ", 0, MAX_PHRASE_CHARS) + 1 or MAX_PHRASE_CHARS
            else:
                break
            phrase, self._pending = self._pending[:cut], self._pending[cut:]
            if phrase.strip():
                out.append(phrase.strip())
        return out

    def flush(self) -> list[str]:
        rest, self._pending = self._pending.strip(), ""
        return [rest] if rest else []


@dataclass(slots=True)
class Voice:
    """What each phrase's speech request carries but its text: voice, cloning audio, ...; or,
    for a model that speaks for itself (Qwen3-Omni's talker), its speaker and no TTS."""

    inputs: SpeechInputs | None
    sample_rate: int
    talker_speaker: str | None = None


async def speak(tts: EngineClient, voice: Voice, phrase: str) -> AsyncIterator[Delta]:
    """One phrase's audio deltas, as the TTS model makes them; its error raised."""
    assert voice.inputs is not None
    async with tts.request(replace(voice.inputs, input=phrase), True) as batches:
        async for batch in batches:
            for delta in batch:
                if delta.audio:
                    yield delta
                if delta.finish_reason is not None:
                    error = errors.terminal_error(delta)
                    if error is not None:
                        raise error
                    return
    raise errors.no_terminal("speech")
