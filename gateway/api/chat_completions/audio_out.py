"""Chat completions with audio out (`modalities: ["text", "audio"]`): the answer's text goes to
the served TTS model phrase by phrase as the chat model writes it, so the first audio comes
long before the text is complete.

Two tasks and one order: the chat request streams its deltas; each phrase the text completes
(`Phrases`, gateway/audio/speech/phrases.py: a sentence end, a line end, or `MAX_PHRASE_CHARS` cut at a space) is queued for
one speaker task, which speaks the phrases one after the other (one speech request each, in
order), so the audio is the text's order and the TTS works while the text goes on. In one
worker both run on its MLX thread, which takes their steps in turns (worker/runtime/
scheduler.py); with a models file, in two workers.

Output, in OpenAI's shape: not streamed, `message.audio = {id, data (the whole answer in
`format`, base64), transcript, expires_at}` and `content` null; streamed (`pcm16`), the text
as `delta.audio.transcript` pieces and the audio as `delta.audio.data` pieces (base64 16-bit
PCM at the TTS model's rate), the first carrying `id` and `expires_at`. Tool calls and
reasoning stay as they are (not spoken). The answer's transcript is kept by its id
(spoken_answers.py) for later turns. Usage is the chat's.

A streamed answer's headers go out at once: a failure after that (the chat or the speech
failing) is an error event, then `[DONE]`. The client leaving cancels both tasks, which aborts
both requests at their workers.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from msgspec.structs import replace
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import StreamingResponse

from gateway.api.chat_completions.chunks import usage_dict
from gateway.api.chat_completions.spoken_answers import SpokenAnswers
from gateway.audio.speech.encoding import encode
from gateway.audio.speech.phrases import Phrases, PhraseSpeaker, Voice
from gateway.generation.output import ChoiceOutput
from gateway.generation.request import GenerationRequest
from gateway.http import errors
from gateway.http.disconnect import DisconnectWatcher
from gateway.http.errors import APIError
from gateway.http.sse import SSE_DONE, sse_error
from gateway.media.resolve import media_settings, resolve_media
from gateway.workers.protocol import EngineClient
from protocol.messages import Delta, Usage

# OpenAI's format names -> the speech encoder's.
SPEECH_FORMATS = {"pcm16": "pcm", "wav": "wav", "mp3": "mp3", "flac": "flac", "opus": "opus",
                  "aac": "aac"}  # fmt: skip


@dataclass(slots=True)
class SpokenChoice:
    output: ChoiceOutput
    pcm: bytes
    sample_rate: int


# -- the two tasks -------------------------------------------------------------------------


async def _speaker(tts: EngineClient, voice: Voice, phrases: asyncio.Queue, on_audio: Any) -> None:
    """Speak the queued phrases in order until the None that ends them (nothing to do when
    the chat model speaks for itself: its request brings the audio)."""
    if voice.talker_speaker is not None:
        return
    speaker = PhraseSpeaker(tts, voice)
    while (phrase := await phrases.get()) is not None:
        async for delta in speaker.speak(phrase):
            await on_audio(delta)


async def _write(
    chat: EngineClient, req: GenerationRequest, request: Request, phrases: asyncio.Queue,
    on_delta: Any, voice: Voice, on_audio: Any,
) -> ChoiceOutput:  # fmt: skip
    """Run the chat request, queueing the phrases its text completes; its output. With the
    model's own talker the request speaks too: its audio deltas go to `on_audio`."""
    resolved = await resolve_media(req.media, media_settings(request)) if req.media else None
    output = ChoiceOutput(0)
    splitter = Phrases(request.app.state.config.first_phrase_words)
    inputs = req.choices(resolved)[0]
    talker = voice.talker_speaker
    if talker is not None:
        inputs = replace(inputs, talker_speaker=talker)
    async with chat.request(inputs, True) as batches:
        async for batch in batches:
            for delta in batch:
                output.add(delta)
                if delta.audio:
                    await on_audio(delta)
                else:
                    if talker is None:
                        for phrase in splitter.feed(delta.text):
                            phrases.put_nowait(phrase)
                    await on_delta(delta)
                if delta.finish_reason is not None:
                    error = errors.terminal_error(delta)
                    if error is not None:
                        raise error
                    for phrase in splitter.flush():
                        phrases.put_nowait(phrase)
                    phrases.put_nowait(None)
                    return output
    raise errors.no_terminal()


# -- not streamed --------------------------------------------------------------------------


async def complete(
    request: Request, chat: EngineClient, tts: EngineClient, req: GenerationRequest, voice: Voice
) -> SpokenChoice:
    """The answer and all its audio; the client leaving cancels both (ClientDisconnected)."""
    watcher = DisconnectWatcher(request.receive)
    try:
        return await watcher.run(_complete(request, chat, tts, req, voice))
    finally:
        watcher.close()


async def _complete(
    request: Request, chat: EngineClient, tts: EngineClient, req: GenerationRequest, voice: Voice
) -> SpokenChoice:
    phrases: asyncio.Queue = asyncio.Queue()
    pcm: list[bytes] = []
    rate = [voice.sample_rate]

    async def keep(delta: Delta) -> None:
        pcm.append(delta.audio)
        rate[0] = delta.sample_rate or rate[0]

    async def ignore(delta: Delta) -> None:
        return None

    speaker = asyncio.ensure_future(_speaker(tts, voice, phrases, keep))
    try:
        output = await _write(chat, req, request, phrases, ignore, voice, keep)
        await speaker
    finally:
        speaker.cancel()
        await asyncio.gather(speaker, return_exceptions=True)
    return SpokenChoice(output, b"".join(pcm), rate[0])


async def audio_body(spoken: SpokenChoice, fmt: str, answers: SpokenAnswers) -> dict[str, Any]:
    """`message.audio` of a spoken answer (encoded off the event loop), kept by its id."""
    data = await run_in_threadpool(encode, SPEECH_FORMATS[fmt], spoken.pcm, spoken.sample_rate)
    audio_id, expires_at = answers.new_id(), answers.expiry()
    answers.add(audio_id, spoken.output.text, expires_at)
    return {
        "id": audio_id,
        "data": base64.b64encode(data).decode(),
        "expires_at": expires_at,
        "transcript": spoken.output.text,
    }


# -- streamed ------------------------------------------------------------------------------


def stream(
    request: Request,
    chat: EngineClient,
    tts: EngineClient,
    req: GenerationRequest,
    voice: Voice,
    head: dict[str, Any],
    answers: SpokenAnswers,
) -> StreamingResponse:
    """An SSE response: transcript and audio pieces as they come (see the module docstring).
    `head`: the chunks' id, object, created and model."""
    return StreamingResponse(
        _events(request, chat, tts, req, voice, head, answers), media_type="text/event-stream"
    )


async def _events(
    request: Request, chat: EngineClient, tts: EngineClient, req: GenerationRequest,
    voice: Voice, head: dict[str, Any], answers: SpokenAnswers,
) -> AsyncIterator[bytes]:  # fmt: skip
    out: asyncio.Queue = asyncio.Queue()
    phrases: asyncio.Queue = asyncio.Queue()
    audio_id, expires_at = answers.new_id(), answers.expiry()

    async def on_delta(delta: Delta) -> None:
        out.put_nowait(("text", delta))

    async def on_audio(delta: Delta) -> None:
        out.put_nowait(("audio", delta))

    async def run(work: Any, done: str) -> None:
        try:
            out.put_nowait((done, await work))
        except APIError as exc:
            out.put_nowait(("error", exc))
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug: the stream still ends, with an error event
            out.put_nowait(("error", errors.no_terminal()))

    writer = asyncio.ensure_future(
        run(_write(chat, req, request, phrases, on_delta, voice, on_audio), "written")
    )
    speaker = asyncio.ensure_future(run(_speaker(tts, voice, phrases, on_audio), "spoken"))
    chunk = _Chunker(head, audio_id, expires_at, req.include_usage)
    try:
        yield chunk.choice({"role": "assistant", "content": None})
        output: ChoiceOutput | None = None
        spoken = False
        while output is None or not spoken:
            kind, item = await out.get()
            if kind == "error":
                yield sse_error(item)
                return
            if kind == "written":
                output = item
            elif kind == "spoken":
                spoken = True
            elif kind == "text":
                piece = chunk.text(item)
                if piece:
                    yield piece
            else:
                yield chunk.audio(item)
        answers.add(audio_id, output.text, expires_at)
        yield chunk.finish(output)
    finally:
        for task in (writer, speaker):
            task.cancel()
        await asyncio.gather(writer, speaker, return_exceptions=True)


class _Chunker:
    """`chat.completion.chunk` events of a spoken answer."""

    def __init__(
        self, head: dict[str, Any], audio_id: str, expires_at: int, include_usage: bool
    ) -> None:
        self._head = head
        self._audio_id = audio_id
        self._expires_at = expires_at
        self._include_usage = include_usage
        self._first_audio = True

    def _event(self, choice: dict[str, Any], usage: Any = None) -> bytes:
        body = {**self._head, "choices": [choice] if choice else []}
        if self._include_usage:
            body["usage"] = usage
        return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"

    def choice(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return self._event({"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish})

    def _audio(self, fields: dict[str, Any]) -> dict[str, Any]:
        if self._first_audio:
            self._first_audio = False
            return {"id": self._audio_id, "expires_at": self._expires_at, **fields}
        return fields

    def text(self, delta: Delta) -> bytes:
        out = b""
        if delta.reasoning:
            out += self.choice({"reasoning_content": delta.reasoning})
        if delta.text:
            out += self.choice({"audio": self._audio({"transcript": delta.text})})
        for piece in delta.tool_calls:
            call: dict[str, Any] = {
                "index": piece.index,
                "function": {"arguments": piece.arguments},
            }
            if piece.id is not None:
                call.update(id=piece.id, type="function")
            if piece.name is not None:
                call["function"]["name"] = piece.name
            out += self.choice({"tool_calls": [call]})
        return out

    def audio(self, delta: Delta) -> bytes:
        data = base64.b64encode(delta.audio).decode()
        return self.choice({"audio": self._audio({"data": data})})

    def finish(self, output: ChoiceOutput) -> bytes:
        reason = "tool_calls" if output.calls else output.finish_reason or "stop"
        events = self.choice({}, reason)
        if self._include_usage:
            usage = usage_dict(output.usage or Usage(0, 0))
            events += self._event({}, usage)
        return events + SSE_DONE
