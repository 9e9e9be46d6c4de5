"""One realtime session: the client's events dispatched, the conversation, the input audio's
turns, transcriptions and responses.

A committed turn (by the server VAD's `speech_stopped`, or `input_audio_buffer.commit`)
becomes a user item with an `input_audio` part; the speech-recognition model transcribes it
(its text streamed as `conversation.item.input_audio_transcription.delta` events when the
session asked for input transcription) and, with server VAD's `create_response`, a response
follows once the transcript is in: the chat model hears the conversation as text. With server
VAD the transcription starts 200 ms into the turn's closing silence, before the VAD ends the
turn (transcription.py). One
response runs at a time; speech that starts during it cancels it (barge-in, with
`interrupt_response`). Every client event that cannot be taken is answered with an `error`
event naming it, and the session goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.websockets import WebSocket

from gateway.api.realtime import config as cfg
from gateway.api.realtime.input_audio import BYTES_PER_MS, InputBuffer
from gateway.api.realtime.items import (
    MAX_ITEMS,
    Item,
    Part,
    chat_messages,
    decode_audio,
    item_object,
    parse_item,
)
from gateway.api.realtime.names import Names
from gateway.api.realtime.response import Response, Speech
from gateway.api.realtime.transcription import (
    EarlyTranscript,
    read_early,
    recognize,
    speech_cut_ms,
    transcribe,
)
from gateway.api.realtime.vad import SpeechProbability, TurnDetector, vad_session
from gateway.api.realtime.wire import EventError, Outbox, as_event_error, error_event, new_id
from gateway.audio.speech.served import phrase_voice, speech_model
from gateway.audio.speech.voices import described_only, described_voice_error
from gateway.generation.chat_body import parse_chat
from gateway.http.errors import APIError
from gateway.http.model_names import resolve_model
from gateway.http.model_routing import engine_for, first_model_of
from gateway.media.parts import MediaCollector
from gateway.workers.errors import EngineUnavailable
from gateway.workers.protocol import EngineClient
from gateway.workers.served_models import DEFAULT_NAMES, SPEECH, TRANSCRIPTION

log = logging.getLogger("vllm_omni_mlx.realtime")
THREADPOOL_APPEND_MS = 1000  # appends longer than this run the VAD off the event loop


class Session:
    def __init__(self, websocket: WebSocket, names: Names, model: str, chat: EngineClient) -> None:
        self.websocket = websocket
        self.names = names
        self.id = new_id("sess")
        self.outbox = Outbox(websocket)
        self.config = cfg.SessionConfig(model=model)
        self.chat = chat
        self.items: list[Item] = []
        self.input = InputBuffer(None)
        self.response: Response | None = None
        self._launching: asyncio.Task | None = None  # a response waiting for its inputs
        self._transcripts: dict[str, asyncio.Task] = {}
        self._speech_item_id: str | None = None  # the item a turn in progress will become
        self._early: EarlyTranscript | None = None  # the turn in progress's, once it paused
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[None]]] = {
            "session.update": self._session_update,
            "input_audio_buffer.append": self._append,
            "input_audio_buffer.commit": self._commit,
            "input_audio_buffer.clear": self._clear,
            "conversation.item.create": self._item_create,
            "conversation.item.truncate": self._item_truncate,
            "conversation.item.delete": self._item_delete,
            "conversation.item.retrieve": self._item_retrieve,
            "response.create": self._response_create,
            "response.cancel": self._response_cancel,
        }

    async def send(self, event: dict[str, Any]) -> None:
        await self.outbox.send(event)

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        try:
            await self._use_turn_detection()
        except EventError as exc:  # no VAD here: the session goes on, committed by hand
            self.config.turn_detection = None
            await self.send(error_event(exc, None))
        await self.send({"type": "session.created", "session": self._session_object()})
        if self.names.beta:
            await self.send({"type": "conversation.created",
                             "conversation": {"id": "conv_default", "object": "realtime.conversation"}})  # fmt: skip

    async def handle(self, event: dict[str, Any]) -> None:
        handler = self._handlers.get(event["type"])
        try:
            if handler is None:
                raise EventError(f"unknown event type {event['type']!r}", "type", "invalid_event")
            await handler(event)
        except EventError as exc:
            await self.send(error_event(exc, _client_id(event)))
        except (APIError, EngineUnavailable) as exc:  # a request's own (a parser's, a model's)
            await self.send(error_event(as_event_error(exc), _client_id(event)))

    async def close(self) -> None:
        self.outbox.closed = True
        if self.response is not None:
            self.response.cancel("client_disconnected")
        tasks = [t for t in self._transcripts.values() if not t.done()]
        if self._launching is not None:
            tasks.append(self._launching)
        if self._early is not None:
            tasks.append(self._early.task)
        if self.response is not None and self.response.task is not None:
            tasks.append(self.response.task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- session -----------------------------------------------------------------------------

    def _session_object(self) -> dict[str, Any]:
        return cfg.session_object(self.config, self.id, self.names)

    async def _session_update(self, event: dict[str, Any]) -> None:
        config = self.config.copy()
        cfg.apply(config, event.get("session"), "session", cfg.SESSION_FIELDS)
        self.config = config
        await self._use_turn_detection()
        await self.send({"type": "session.updated", "session": self._session_object()})

    async def _use_turn_detection(self) -> None:
        turn = self.config.turn_detection
        detector = self.input.detector
        if turn is None:
            self.input.detector = None
            await self._drop_early()
        elif detector is None:
            session = await run_in_threadpool(vad_session)
            probability = SpeechProbability(session)
            self.input.detector = TurnDetector(probability, turn.settings, self.input.end_ms)
        else:
            detector.rule.settings = turn.settings

    # -- input audio -------------------------------------------------------------------------

    async def _append(self, event: dict[str, Any]) -> None:
        _fields(event, {"audio"})
        pcm = decode_audio(event.get("audio"), "audio")
        if len(pcm) > THREADPOOL_APPEND_MS * BYTES_PER_MS and self.input.detector is not None:
            turns = await run_in_threadpool(self.input.append, pcm)
        else:
            turns = self.input.append(pcm)
        for turn in turns:
            if turn.kind == "started":
                await self._speech_started(turn.ms)
            else:
                await self._speech_stopped(turn.ms, turn.speech_end_ms)
        await self._transcribe_early()

    async def _transcribe_early(self) -> None:
        """Start transcribing the turn in progress once a silence has lasted `EARLY_AFTER_MS`;
        stop doing so once speech resumes (a new silence starts anew) or the transcription
        settings change."""
        detector, early = self.input.detector, self._early
        pause = detector.silence_start_ms if detector is not None else None
        settings = dict(self.config.transcription or {})
        if early is not None and not early.serves(pause, settings):
            await self._drop_early()
        if detector is None or pause is None or self._early is not None:
            return
        cut_ms = speech_cut_ms(pause, detector.rule.settings.silence_duration_ms)
        if detector.heard_ms >= cut_ms:
            audio = self.input.peek(self.input.turn_start_ms, cut_ms)
            self._early = EarlyTranscript(pause, settings, self._recognize(audio, settings))

    async def _drop_early(self) -> None:
        if self._early is not None:
            early, self._early = self._early, None
            await early.cancel()

    async def _speech_started(self, start_ms: int) -> None:
        self._speech_item_id = new_id("item")
        await self.send({"type": "input_audio_buffer.speech_started",
                         "audio_start_ms": start_ms, "item_id": self._speech_item_id})  # fmt: skip
        self.input.turn_start_ms = start_ms
        turn = self.config.turn_detection
        if turn is not None and turn.interrupt_response:  # barge-in
            if self._launching is not None:
                self._launching.cancel()
            if self.response is not None:
                self.response.cancel("turn_detected")

    async def _speech_stopped(self, end_ms: int, speech_end_ms: int | None) -> None:
        item_id = self._speech_item_id or new_id("item")
        self._speech_item_id = None
        await self.send({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": end_ms,
                         "item_id": item_id})  # fmt: skip
        # The transcript is of the turn up to EARLY_AFTER_MS into its closing silence: the
        # early pass's when it heard this turn, else a pass over the same audio now.
        early, self._early = self._early, None
        if early is not None and not early.serves(speech_end_ms, self.config.transcription or {}):
            await early.cancel()
            early = None
        heard: EarlyTranscript | bytes | None = early
        if early is None and speech_end_ms is not None and self.input.detector is not None:
            # (a stop comes from the detector, and always says where its silence began)
            silence_ms = self.input.detector.rule.settings.silence_duration_ms
            cut_ms = speech_cut_ms(speech_end_ms, silence_ms)
            heard = self.input.peek(self.input.turn_start_ms, cut_ms)
        audio = self.input.take(self.input.turn_start_ms, end_ms)
        turn = self.config.turn_detection
        await self._committed(item_id, audio, bool(turn and turn.create_response), heard)

    async def _commit(self, event: dict[str, Any]) -> None:
        _fields(event, set())
        audio = self.input.commit()
        await self._drop_early()
        await self._committed(self._speech_item_id or new_id("item"), audio, False)
        self._speech_item_id = None

    async def _clear(self, event: dict[str, Any]) -> None:
        _fields(event, set())
        self.input.clear()
        await self._drop_early()
        self._speech_item_id = None
        await self.send({"type": "input_audio_buffer.cleared"})

    async def _committed(self, item_id: str, audio: bytes, respond: bool,
                         heard: EarlyTranscript | bytes | None = None) -> None:  # fmt: skip
        """A turn's audio as a user item, transcribed from `heard` (an early pass, or the
        speech's audio; default: the whole turn's)."""
        previous = self.items[-1].id if self.items else None
        await self.send({"type": "input_audio_buffer.committed", "previous_item_id": previous,
                         "item_id": item_id})  # fmt: skip
        item = Item(item_id, "message", "user", [Part("input_audio", audio=audio)])
        try:
            await self._add(item, previous)
        except EventError:
            if isinstance(heard, EarlyTranscript):
                await heard.cancel()
            raise
        self._transcribe_soon(item, heard)
        if respond and self.response is None and self._launching is None:
            self._launch(self.config.copy(), None, True, None)

    # -- transcription -----------------------------------------------------------------------

    def _transcribe_soon(self, item: Item, heard: EarlyTranscript | bytes | None = None) -> None:
        """Transcribe the item in a task of its own, from `heard` (an early pass that heard
        it, or audio; default: the item's audio); a response waits for it."""
        announce = self.config.transcription is not None
        if isinstance(heard, EarlyTranscript):
            reading = read_early(self.send, item, heard, announce)
        else:
            audio = item.content[0].audio if heard is None else heard
            pieces = self._recognize(audio, self.config.transcription or {})
            reading = transcribe(self.send, item, pieces, announce)
        task = self._transcripts[item.id] = asyncio.ensure_future(reading)
        task.add_done_callback(lambda _: self._transcripts.pop(item.id, None))

    def _recognize(self, audio: bytes, settings: dict[str, Any]) -> AsyncIterator[str]:
        return recognize(lambda: self._engine(settings.get("model"), TRANSCRIPTION), audio,
                         settings)  # fmt: skip

    # -- conversation ------------------------------------------------------------------------

    def _find(self, item_id: Any, param: str = "item_id") -> Item:
        for item in self.items:
            if item.id == item_id:
                return item
        raise EventError(
            f"no item with id {item_id!r} in the conversation", param, "item_not_found"
        )

    async def _add(self, item: Item, previous_id: str | None) -> None:
        if len(self.items) >= MAX_ITEMS:
            raise EventError(f"a conversation holds at most {MAX_ITEMS} items", None,
                             "conversation_full")  # fmt: skip
        if any(existing.id == item.id for existing in self.items):
            raise EventError(f"an item with id {item.id!r} exists", "item.id", "duplicate_item_id")
        index = len(self.items)
        if previous_id == "root":
            index = 0
        elif previous_id is not None and previous_id != (self.items[-1].id if self.items else None):
            index = self.items.index(self._find(previous_id, "previous_item_id")) + 1
        self.items.insert(index, item)
        previous = self.items[index - 1].id if index else None
        body = {"previous_item_id": previous, "item": item_object(item, self.names)}
        await self.send({"type": self.names.item_added, **body})
        if not self.names.beta and item.status == "completed":
            await self.send({"type": "conversation.item.done", **body})

    async def _item_create(self, event: dict[str, Any]) -> None:
        _fields(event, {"item", "previous_item_id"})
        item = parse_item(event.get("item"))
        previous = event.get("previous_item_id")
        if previous is not None and not isinstance(previous, str):
            raise EventError("`previous_item_id` must be a string", "previous_item_id")
        await self._add(item, previous)
        part = item.content[0] if item.content else None
        if part is not None and part.type == "input_audio" and not part.transcribed:
            self._transcribe_soon(item)

    async def _item_truncate(self, event: dict[str, Any]) -> None:
        _fields(event, {"item_id", "content_index", "audio_end_ms"})
        item = self._find(event.get("item_id"))
        index, end_ms = event.get("content_index", 0), event.get("audio_end_ms")
        part = (
            item.content[index]
            if isinstance(index, int) and 0 <= index < len(item.content)
            else None
        )
        if part is None or part.spoken is None:
            raise EventError("`content_index` must name an assistant audio part of the item",
                             "content_index")  # fmt: skip
        if isinstance(end_ms, bool) or not isinstance(end_ms, int) or end_ms < 0:
            raise EventError("`audio_end_ms` must be an integer of at least 0", "audio_end_ms")
        if end_ms > part.spoken.audio_ms:
            raise EventError(f"`audio_end_ms` {end_ms} is past the audio's end "
                             f"({part.spoken.audio_ms} ms)", "audio_end_ms")  # fmt: skip
        part.spoken.truncate(end_ms)
        await self.send({"type": "conversation.item.truncated", "item_id": item.id,
                         "content_index": index, "audio_end_ms": end_ms})  # fmt: skip

    async def _item_delete(self, event: dict[str, Any]) -> None:
        _fields(event, {"item_id"})
        item = self._find(event.get("item_id"))
        self.items.remove(item)
        await self.send({"type": "conversation.item.deleted", "item_id": item.id})

    async def _item_retrieve(self, event: dict[str, Any]) -> None:
        _fields(event, {"item_id"})
        item = self._find(event.get("item_id"))
        await self.send({"type": "conversation.item.retrieved",
                         "item": item_object(item, self.names)})  # fmt: skip

    # -- responses ---------------------------------------------------------------------------

    async def _response_create(self, event: dict[str, Any]) -> None:
        _fields(event, {"response"})
        if self.response is not None or self._launching is not None:
            raise EventError("a response is in progress: cancel it or wait for response.done",
                             None, "conversation_already_has_active_response")  # fmt: skip
        body = event.get("response") or {}
        config = self.config.copy()
        cfg.apply(config, body, "response", cfg.RESPONSE_FIELDS)
        conversation = body.get("conversation", "auto")
        if conversation not in ("auto", "none"):
            raise EventError('`response.conversation` must be "auto" or "none"',
                             "response.conversation")  # fmt: skip
        items = None
        if "input" in body:
            items = self._input_items(body["input"])
        self._launch(config, items, conversation == "auto", _client_id(event))

    def _input_items(self, value: Any) -> list[Item]:
        if not isinstance(value, list):
            raise EventError("`response.input` must be an array of items", "response.input")
        items = []
        for i, entry in enumerate(value):
            if isinstance(entry, dict) and entry.get("type") == "item_reference":
                items.append(self._find(entry.get("id"), f"response.input[{i}].id"))
            else:
                items.append(parse_item(entry, f"response.input[{i}]"))
        return items

    def _launch(self, config: cfg.SessionConfig, items: list[Item] | None, into: bool,
                client_event_id: str | None) -> None:  # fmt: skip
        """Start a response once its inputs are in (their transcripts); its errors as events
        naming the client's response.create."""
        start = self._start_response(config, items, into, client_event_id)
        task = self._launching = asyncio.ensure_future(start)

        def launched(_: asyncio.Task) -> None:
            if self._launching is task:
                self._launching = None

        task.add_done_callback(launched)
        task.add_done_callback(_log_failure)

    async def _start_response(self, config: cfg.SessionConfig, items: list[Item] | None,
                              into_conversation: bool, client_event_id: str | None) -> None:  # fmt: skip
        try:
            await self._prepare_and_start(config, items, into_conversation)
        except (EventError, APIError, EngineUnavailable) as exc:
            error = as_event_error(exc)
            await self.send(error_event(error, client_event_id))

    async def _prepare_and_start(self, config: cfg.SessionConfig, items: list[Item] | None,
                                 into_conversation: bool) -> None:  # fmt: skip
        context = self.items if items is None else items
        for item in context:  # the chat model hears audio as its transcript
            task = self._transcripts.get(item.id)
            if task is not None:
                await asyncio.gather(task, return_exceptions=True)
        body: dict[str, Any] = {
            "model": config.model,
            "messages": chat_messages(config.instructions, context),
            "stream": True,
        }
        if config.tools:
            body["tools"] = config.tools
            body["tool_choice"] = config.tool_choice
        if config.max_output_tokens is not None:
            body["max_tokens"] = config.max_output_tokens
        if config.temperature is not None:
            body["temperature"] = config.temperature
        limit = self.websocket.app.state.config.max_tokens
        req = parse_chat(body, limit, MediaCollector())
        speech = await self._speech(config) if config.audio_out else None
        info = {"output_modalities" if not self.names.beta else "modalities":
                (["audio"] if not self.names.beta else ["text", "audio"]) if config.audio_out
                else ["text"],
                "max_output_tokens": config.max_output_tokens or "inf"}  # fmt: skip
        add = self._add_output if into_conversation else None
        response = self.response = Response(self.send, self.names, self.chat,
                                            req.choices(None)[0], speech, add, info)  # fmt: skip
        response.start().add_done_callback(lambda _: self._response_ended(response))

    def _response_ended(self, response: Response) -> None:
        if self.response is response:
            self.response = None

    async def _add_output(self, item: Item) -> None:
        await self._add(item, None)

    async def _speech(self, config: cfg.SessionConfig) -> Speech:
        engine = await self._engine(None, SPEECH)
        ready = engine.ready_info
        if ready is not None and ready.speech is None:
            raise EventError("audio output needs a TTS model: start the server with "
                             "`--speech-model TTS`, or ask for output_modalities [\"text\"]",
                             "session.output_modalities", "model_not_found")  # fmt: skip
        audio = speech_model(engine)
        if described_only(audio):
            exc = described_voice_error(audio, "session.audio.output.voice", "a Realtime session")
            raise EventError(exc.message, exc.param, "invalid_value")
        fields = {"model": audio.model, "voice": config.voice, "response_format": "pcm"}
        if config.speed is not None:
            fields["speed"] = config.speed
        try:
            voice = phrase_voice(self.websocket, audio, fields)
        except APIError as exc:
            param = "session.audio.output.voice" if exc.param == "voice" else exc.param
            raise EventError(exc.message, param, exc.code or "invalid_value") from None
        return Speech(engine, voice, self.websocket.app.state.config.first_phrase_words)

    async def _engine(self, name: str | None, kind: str) -> EngineClient:
        """The engine of the model `name` names (None: the served one of `kind`); a name that
        reaches no model of that kind is an error naming it."""
        pool = self.websocket.app.state.pool
        if pool is None:
            if name is not None:
                resolve_model(self.websocket, name, kind)
            return self.chat
        if name is None or name in DEFAULT_NAMES.get(kind, ()):  # OpenAI's: the first of its kind
            name = first_model_of(self.websocket, kind)
        return await engine_for(self.websocket, name, kind)

    async def _response_cancel(self, event: dict[str, Any]) -> None:
        _fields(event, {"response_id"})
        response = self.response
        wanted = event.get("response_id")
        if response is None or (wanted is not None and wanted != response.id):
            raise EventError("no response in progress to cancel", "response_id",
                             "response_cancel_not_active")  # fmt: skip
        response.cancel("client_cancelled")


def _fields(event: dict[str, Any], allowed: set[str]) -> None:
    for key in event:
        if key not in allowed and key not in ("type", "event_id"):
            raise EventError(f"unknown field `{key}` of {event['type']}", key, "unknown_parameter")


def _client_id(event: dict[str, Any]) -> str | None:
    value = event.get("event_id")
    return value if isinstance(value, str) else None


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("realtime task failed", exc_info=task.exception())
