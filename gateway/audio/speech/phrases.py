"""Text spoken phrase by phrase: `Phrases` cuts streamed text into phrases (a sentence end, a
line end, or `MAX_PHRASE_CHARS` cut at a space; the first phrase also at its first clause
boundary or after FIRST_PHRASE_WORDS words, so speech starts sooner), `Voice` is what each
phrase's speech request carries but its text and context, and `PhraseSpeaker` speaks a run of
phrases, a request each, each going on from the one before. Shared by chat completions' audio
out (gateway/api/chat_completions/audio_out.py), the speech WebSocket and the Realtime
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
from protocol.messages import Delta, ErrorCode, FinishReason

MAX_PHRASE_CHARS = 160
# A sentence end followed by a space (so "3.14" or "..." still being written does not cut), or
# a line end.
_PHRASE_END = re.compile(r"[.!?;:\u3002\uff01\uff1f]+[\"')\]]*\s|\n")
# The first phrase is the one the listener waits for (the answer's first audio comes after its
# text is written and spoken): it also ends at a clause boundary (a comma or a dash followed by
# a space) once it has MIN_CLAUSE_WORDS words, or after FIRST_PHRASE_WORDS words at most. Later
# phrases are whole sentences, spoken while the answer goes on (and with a sentence's prosody).
FIRST_PHRASE_WORDS = 6
MIN_CLAUSE_WORDS = 2
# (Words are counted between spaces: text written without them gets the sentence rule only.)
# (A dash after a word's letter, so "5 - 3" is no boundary.)
_CLAUSE_END = re.compile(r",[\"')\]]*\s|(?<=[^\W\d_])\s[-\u2013\u2014]+\s|[\u2013\u2014]\s")
_WORD_END = re.compile(r"\w\S*\s")


class Phrases:
    """Text in as it streams; complete phrases out, in order. `first_words`: the first phrase's
    word limit (0: the first phrase is cut like the others)."""

    def __init__(self, first_words: int = FIRST_PHRASE_WORDS) -> None:
        self._pending = ""
        self._first_words = first_words

    def feed(self, text: str) -> list[str]:
        self._pending += text
        out = []
        while True:
            cut = self._cut()
            if cut is None:
                break
            phrase, self._pending = self._pending[:cut], self._pending[cut:]
            if phrase.strip():
                out.append(phrase.strip())
                self._first_words = 0
        return out

    def _cut(self) -> int | None:
        """Where the pending text's first complete phrase ends, if it has one."""
        sentence = _PHRASE_END.search(self._pending)
        ends = [sentence.end()] if sentence is not None else []
        if self._first_words and self._pending.strip():
            words = [m.end() for m in _WORD_END.finditer(self._pending)]
            for clause in _CLAUSE_END.finditer(self._pending):
                if sum(1 for w in words if w <= clause.end()) >= MIN_CLAUSE_WORDS:
                    ends.append(clause.end())
                    break
            if len(words) >= self._first_words:
                ends.append(words[self._first_words - 1])
        if ends:
            return min(ends)
        if len(self._pending) > MAX_PHRASE_CHARS:
            return self._pending.rfind(" ", 0, MAX_PHRASE_CHARS) + 1 or MAX_PHRASE_CHARS
        return None

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


class PhraseSpeaker:
    """Phrases spoken in order in one voice, each its own speech request: each phrase goes on
    from the one before where the model hands back a context for it (Qwen3-TTS: the previous
    phrase's text and frames, worker/speech/continuation.py), passed on unread. A context the
    model refuses (another model came in between: a swap) is dropped, and the phrase spoken
    alone."""

    def __init__(self, tts: EngineClient, voice: Voice) -> None:
        self._tts = tts
        self.voice = voice
        self._context: bytes | None = None

    async def speak(self, phrase: str) -> AsyncIterator[Delta]:
        """One phrase's audio deltas, as the TTS model makes them; its error raised."""
        context, self._context = self._context, None
        try:
            async for delta in self._request(phrase, context):
                yield delta
        except _ContextRefused:  # before any audio: once more, alone
            async for delta in self._request(phrase, None):
                yield delta

    async def _request(self, phrase: str, context: bytes | None) -> AsyncIterator[Delta]:
        assert self.voice.inputs is not None
        inputs = replace(self.voice.inputs, input=phrase, context=context)
        async with self._tts.request(inputs, True) as batches:
            async for batch in batches:
                for delta in batch:
                    if delta.audio:
                        yield delta
                    if delta.finish_reason is not None:
                        if context is not None and _refused_context(delta):
                            raise _ContextRefused
                        error = errors.terminal_error(delta)
                        if error is not None:
                            raise error
                        self._context = delta.speech_context or None
                        return
        raise errors.no_terminal("speech")


class _ContextRefused(Exception):
    pass


def _refused_context(delta: Delta) -> bool:
    """A terminal delta refusing the request's context (and so before any audio)."""
    error = delta.error
    return (
        delta.finish_reason == FinishReason.ERROR
        and error is not None
        and error.code == ErrorCode.BAD_REQUEST
        and error.message.startswith("context")
    )
