"""One response of a realtime session: the chat model's deltas as the Realtime API's events,
its text spoken phrase by phrase by the TTS model while it is still being written.

    response.created
    response.output_item.added          an assistant message (at its first text) or a call
    conversation.item.added             (beta: conversation.item.created)
    response.content_part.added         output_audio (with its transcript) or output_text
    response.output_audio_transcript.delta ...   the text, as it is written
    response.output_audio.delta ...              24 kHz PCM16, phrase by phrase
    response.function_call_arguments.delta ...   a call's arguments
    ... .done events, response.output_item.done, conversation.item.done
    response.done                       status completed / cancelled / failed, usage

As for audio out of chat (gateway/api/chat_completions/audio_out.py): the chat request streams; each phrase
its text completes is queued for one speaker task that speaks them in order. Cancelling (the
client's response.cancel, or speech that starts during the response: barge-in) cancels both
tasks, which aborts both requests at their workers, and cuts the assistant item to what was
sent: for audio, the phrases whose audio had started; for text, the text sent.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gateway.api.realtime.items import Item, Part, Spoken, item_object
from gateway.api.realtime.names import Names
from gateway.api.realtime.pcm import RATE, to_api_rate
from gateway.api.realtime.wire import new_id
from gateway.audio.speech.phrases import Phrases, PhraseSpeaker, Voice
from gateway.generation.output import new_call_id
from gateway.http import errors
from gateway.http.errors import APIError
from gateway.workers.errors import EngineUnavailable
from gateway.workers.protocol import EngineClient
from protocol.inputs import ChatInputs
from protocol.messages import Delta, ToolCallDelta, Usage

Send = Callable[[dict[str, Any]], Awaitable[None]]
AUDIO_CHUNK_BYTES = RATE * 2 // 5  # audio deltas of at most 200 ms


@dataclass(slots=True)
class Speech:
    """The TTS engine and what each phrase is spoken with."""

    engine: EngineClient
    voice: Voice
    first_words: int  # the first phrase's word limit (gateway/audio/speech/phrases.py)


class Response:
    def __init__(
        self, send: Send, names: Names, chat: EngineClient, inputs: ChatInputs,
        speech: Speech | None, add_item: Callable[[Item], Awaitable[None]] | None,
        info: dict[str, Any],
    ) -> None:  # fmt: skip
        self.id = new_id("resp")
        self._send, self._names, self._chat, self._inputs = send, names, chat, inputs
        self._speech = speech
        self._add_item = add_item  # None: out of band (conversation "none")
        self._info = info  # the response object's settings (modalities, max tokens, ...)
        self._output: list[Item] = []
        self._message: Item | None = None
        self._calls: dict[int, Item] = {}
        self._usage: Usage | None = None
        self._cancel_reason: str | None = None
        self._failure: APIError | None = None
        self._text_sent = ""
        self.task: asyncio.Task | None = None
        self.first_audio_at: float | None = None  # loop time of the first audio delta

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> asyncio.Task:
        self.task = asyncio.ensure_future(self._run())
        return self.task

    def cancel(self, reason: str) -> None:
        if self.task is not None and not self.task.done() and self._cancel_reason is None:
            self._cancel_reason = reason
            self.task.cancel()

    @property
    def message(self) -> Item | None:
        return self._message

    async def _run(self) -> None:
        await self._send({"type": "response.created", "response": self._object("in_progress")})
        try:
            await self._generate()
        except asyncio.CancelledError:
            if self._cancel_reason is None:
                raise  # the session is closing
        except APIError as exc:
            self._failure = exc
        except EngineUnavailable as exc:
            self._failure = APIError(503, exc.reason, code="engine_unavailable")
        await self._finish()

    # -- generation --------------------------------------------------------------------------

    async def _generate(self) -> None:
        phrases: asyncio.Queue = asyncio.Queue()
        speaker = None
        if self._speech is not None:
            speaker = asyncio.ensure_future(self._speak_all(phrases))
        splitter = Phrases(self._speech.first_words) if self._speech else Phrases()
        try:
            async with self._chat.request(self._inputs, True) as batches:
                async for batch in batches:
                    for delta in batch:
                        await self._on_delta(delta, splitter, phrases)
                        if delta.finish_reason is not None:
                            error = errors.terminal_error(delta)
                            if error is not None:
                                raise error
                            self._usage = delta.usage
                            break
                    else:
                        continue
                    break
                else:
                    raise errors.no_terminal()
            for phrase in splitter.flush():
                phrases.put_nowait(phrase)
            phrases.put_nowait(None)
            if speaker is not None:
                await speaker
        finally:
            if speaker is not None:
                speaker.cancel()
                await asyncio.gather(speaker, return_exceptions=True)

    async def _on_delta(self, delta: Delta, splitter: Phrases, phrases: asyncio.Queue) -> None:
        if delta.text:
            await self._on_text(delta.text)
            if self._speech is not None:
                for phrase in splitter.feed(delta.text):
                    phrases.put_nowait(phrase)
        for piece in delta.tool_calls:
            await self._on_call_piece(piece)

    async def _on_text(self, text: str) -> None:
        message = await self._open_message()
        part = message.content[0]
        self._text_sent += text
        ids = self._ids(message)
        if part.type == "output_audio":
            assert part.spoken is not None
            part.spoken.transcript += text
            await self._send({"type": self._names.transcript_delta, **ids, "delta": text})
        else:
            part.text += text
            await self._send({"type": self._names.text_delta, **ids, "delta": text})

    async def _open_message(self) -> Item:
        if self._message is not None:
            return self._message
        audio = self._speech is not None
        part = Part("output_audio", spoken=Spoken()) if audio else Part("output_text")
        message = self._message = Item(new_id("item"), "message", "assistant", [part],
                                       status="in_progress")  # fmt: skip
        await self._add_output(message)
        part_object = item_object(message, self._names)["content"][0]
        await self._send({"type": "response.content_part.added", **self._ids(message),
                          "part": part_object})  # fmt: skip
        return message

    async def _add_output(self, item: Item) -> None:
        self._output.append(item)
        await self._send({"type": "response.output_item.added", "response_id": self.id,
                          "output_index": len(self._output) - 1,
                          "item": item_object(item, self._names)})  # fmt: skip
        if self._add_item is not None:
            await self._add_item(item)

    def _ids(self, item: Item, content: bool = True) -> dict[str, Any]:
        ids = {"response_id": self.id, "item_id": item.id,
               "output_index": self._output.index(item)}  # fmt: skip
        if content:
            ids["content_index"] = 0
        return ids

    async def _on_call_piece(self, piece: ToolCallDelta) -> None:
        call = self._calls.get(piece.index)
        if call is None:
            call = self._calls[piece.index] = Item(
                new_id("item"), "function_call", call_id=piece.id or new_call_id(),
                name=piece.name or "", status="in_progress",
            )  # fmt: skip
            await self._add_output(call)
        elif piece.name and not call.name:
            call.name = piece.name
        if piece.arguments:
            call.arguments += piece.arguments
            await self._send({"type": "response.function_call_arguments.delta",
                              **self._ids(call, False), "call_id": call.call_id,
                              "delta": piece.arguments})  # fmt: skip

    async def _speak_all(self, phrases: asyncio.Queue) -> None:
        assert self._speech is not None
        speaker = PhraseSpeaker(self._speech.engine, self._speech.voice)
        while (phrase := await phrases.get()) is not None:
            await self._speak(speaker, phrase)

    async def _speak(self, speaker: PhraseSpeaker, phrase: str) -> None:
        assert self._speech is not None and self._message is not None
        spoken = self._message.content[0].spoken
        assert spoken is not None
        started = False
        async for delta in speaker.speak(phrase):
            pcm = to_api_rate(delta.audio, delta.sample_rate or self._speech.voice.sample_rate)
            if not started:
                spoken.phrases.append((spoken.audio_ms, phrase))
                started = True
            if self.first_audio_at is None:
                self.first_audio_at = asyncio.get_running_loop().time()
            for at in range(0, len(pcm), AUDIO_CHUNK_BYTES):
                chunk = pcm[at : at + AUDIO_CHUNK_BYTES]
                await self._send({"type": self._names.audio_delta, **self._ids(self._message),
                                  "delta": base64.b64encode(chunk).decode()})  # fmt: skip
                spoken.audio_ms += len(chunk) * 1000 // (2 * RATE)

    # -- the end -----------------------------------------------------------------------------

    async def _finish(self) -> None:
        complete = self._cancel_reason is None and self._failure is None
        message = self._message
        if message is not None:
            part = message.content[0]
            if not complete:
                self._cut(part)
            message.status = "completed" if complete else "incomplete"
            ids = self._ids(message)
            if part.type == "output_audio":
                assert part.spoken is not None
                await self._send({"type": self._names.audio_done, **ids})
                await self._send({"type": self._names.transcript_done, **ids,
                                  "transcript": part.spoken.transcript})  # fmt: skip
            else:
                await self._send({"type": self._names.text_done, **ids, "text": part.text})
            await self._send({"type": "response.content_part.done", **ids,
                              "part": item_object(message, self._names)["content"][0]})  # fmt: skip
        for call in self._calls.values():
            call.status = "completed" if complete else "incomplete"
            await self._send({"type": "response.function_call_arguments.done",
                              **self._ids(call, False), "call_id": call.call_id,
                              "name": call.name, "arguments": call.arguments})  # fmt: skip
        for index, item in enumerate(self._output):
            await self._send({"type": "response.output_item.done", "response_id": self.id,
                              "output_index": index, "item": item_object(item, self._names)})  # fmt: skip
            if self._add_item is not None and not self._names.beta:
                await self._send({"type": "conversation.item.done",
                                  "item": item_object(item, self._names)})  # fmt: skip
        status = "completed" if complete else "cancelled" if self._failure is None else "failed"
        await self._send({"type": "response.done", "response": self._object(status)})

    def _cut(self, part: Part) -> None:
        """What the client got of a response that did not complete."""
        if part.type == "output_audio":
            assert part.spoken is not None
            part.spoken.truncate(part.spoken.audio_ms + 1)
        else:
            part.text = self._text_sent

    def _object(self, status: str) -> dict[str, Any]:
        details: dict[str, Any] | None = None
        if status == "cancelled":
            details = {"type": "cancelled", "reason": self._cancel_reason}
        elif status == "failed":
            assert self._failure is not None
            details = {"type": "failed", "error": {"type": self._failure.type,
                                                   "code": self._failure.code,
                                                   "message": self._failure.message}}  # fmt: skip
        usage = self._usage
        return {
            "id": self.id,
            "object": "realtime.response",
            "status": status,
            "status_details": details,
            "output": [item_object(item, self._names) for item in self._output],
            "conversation_id": None if self._add_item is None else "conv_default",
            **self._info,
            "usage": None if usage is None else {
                "total_tokens": usage.prompt_tokens + usage.completion_tokens,
                "input_tokens": usage.prompt_tokens,
                "output_tokens": usage.completion_tokens,
                "input_token_details": {"text_tokens": usage.prompt_tokens, "audio_tokens": 0,
                                        "cached_tokens": usage.cached_tokens},
                "output_token_details": {"text_tokens": usage.completion_tokens,
                                         "audio_tokens": 0},
            },
        }  # fmt: skip
