"""Audio parts for a chat model that cannot hear: each becomes its transcript.

A text-only chat model served with a speech recognizer (the embedded default's Whisper, or
`--transcription-model`; a models file's transcription model) takes `input_audio` parts: the
parser admits them as parts to transcribe (MediaCollector.transcribes), and before the request
runs each one's bytes are fetched and checked as any audio part's, transcribed by the served
recognizer (language detected, Whisper's own decoding), and put in the message as a text part
where the audio was. The response's usage says how many parts were heard that way
(`prompt_tokens_details.transcribed_audio_parts`, an extension). A model that hears audio
itself (an omni model) gets the audio as before.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import msgspec

from gateway.generation.request import GenerationRequest
from gateway.http import errors
from gateway.media.parts import joined_or_parts
from gateway.media.resolve import MediaSettings, resolve_media
from gateway.workers.protocol import EngineClient
from protocol.inputs import ChatInputs, TranscribeInputs


async def transcribe_audio_parts(
    req: GenerationRequest, recognizer: EngineClient, settings: MediaSettings
) -> GenerationRequest:
    """`req` with its audio parts replaced by their transcripts (its other media kept)."""
    audio = tuple(item for item in req.media if item.kind == "audio")
    if not audio or not isinstance(req.inputs, ChatInputs):
        return req
    files = (await resolve_media(audio, settings))["audios"]
    transcripts = await asyncio.gather(
        *(
            _transcribe(recognizer, data, item.format or "wav")
            for data, item in zip(files, audio, strict=True)
        )
    )
    messages = _with_transcripts(req.inputs.messages, list(transcripts))
    inputs = msgspec.structs.replace(req.inputs, messages=messages)
    media = tuple(item for item in req.media if item.kind != "audio")
    return dataclasses.replace(req, inputs=inputs, media=media, transcribed_audio_parts=len(audio))


async def _transcribe(recognizer: EngineClient, data: bytes, fmt: str) -> str:
    inputs = TranscribeInputs(audio=data, filename=f"part.{fmt}")  # as /v1/audio/transcriptions
    texts: list[str] = []
    async with recognizer.request(inputs, False) as batches:
        async for batch in batches:
            for delta in batch:
                texts.append(delta.text)
                if delta.finish_reason is not None:
                    error = errors.terminal_error(delta)
                    if error is not None:
                        raise error
    return "".join(texts).strip()


def _with_transcripts(messages: list[dict[str, Any]], transcripts: list[str]) -> list[dict]:
    """A copy of `messages` with the audio placeholders, in order, made text parts."""
    pending = iter(transcripts)
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(p.get("type") == "audio" for p in content):
            parts = [
                {"type": "text", "text": next(pending)} if part.get("type") == "audio" else part
                for part in content
            ]
            message = {**message, "content": joined_or_parts(parts)}
        out.append(message)
    return out
