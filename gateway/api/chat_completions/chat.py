"""`POST /v1/chat/completions`: OpenAI chat completions, streamed or not, with n choices."""

from __future__ import annotations

import time
import uuid

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.api.chat_completions import audio_out
from gateway.api.chat_completions.choice import choice_of
from gateway.api.chat_completions.chunks import ChatChunks, usage_dict
from gateway.api.chat_completions.mcp import take_mcp_tools, with_mcp
from gateway.api.chat_completions.spoken_answers import SpokenAnswers
from gateway.audio.speech.phrases import Voice
from gateway.audio.speech.served import phrase_voice, speech_model
from gateway.audio.speech.voice_aliases import FEMALE, OPENAI_VOICES
from gateway.audio.speech.voices import described_only, described_voice_error
from gateway.generation import lifecycle
from gateway.generation.audio_parts import transcribe_audio_parts
from gateway.generation.chat_body import CHAT as CHAT_FIELDS
from gateway.generation.chat_body import read_chat
from gateway.generation.request import GenerationRequest
from gateway.http.errors import APIError, invalid, unsupported
from gateway.http.json_request import read_json
from gateway.http.model_routing import check_model, engine_for, first_model_of, reported_name
from gateway.media.parts import MediaCollector
from gateway.media.resolve import media_settings
from gateway.request_context import TIME_LIMIT
from gateway.workers.protocol import EngineClient
from gateway.workers.served_models import CHAT, SPEECH, TRANSCRIPTION
from protocol.inputs import ChatInputs
from protocol.messages import Usage


async def chat_completions(request: Request) -> Response:
    body = await read_json(request)
    body, mcp_tools, mcp_choice = take_mcp_tools(body)
    CHAT_FIELDS.check(body)  # before a model is loaded for it (the parser needs the engine)
    engine = await engine_for(request, body.get("model"), CHAT)
    media = MediaCollector.for_engine(engine, transcribes=_can_transcribe(request, engine))
    answers = spoken_answers(request)
    req = read_chat(body, request.app.state.config.max_tokens, media, answers.transcript)
    check_model(request, req.model)
    TIME_LIMIT.set(req.time_limit)  # this request's task: every Submit it makes carries it
    if media.transcribing:
        recognizer = await _recognizer(request, engine)
        req = await transcribe_audio_parts(req, recognizer, media_settings(request))
    response_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    model = reported_name(engine)
    if mcp_tools:
        head = {"id": response_id, "created": created, "model": model}
        return await with_mcp(request, engine, req, mcp_tools, mcp_choice, head)
    if req.audio_out is not None:
        return await _spoken(request, engine, req, response_id, created, model, body)
    if req.stream:
        chunks = ChatChunks(response_id, created, model, req.include_usage, req.n)
        chunks.transcribed_audio_parts = req.transcribed_audio_parts
        return await lifecycle.stream(request, engine, req, chunks)
    result = await lifecycle.complete(request, engine, req)
    return JSONResponse(
        {
            "id": response_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [choice_of(choice) for choice in result.choices],
            "usage": usage_dict(result.usage, req.transcribed_audio_parts),
        }
    )


def _can_transcribe(request: Request, engine: EngineClient) -> bool:
    """Whether a served recognizer can hear audio parts: the chat model's worker has one, or
    the models file has a transcription model."""
    return _hears(engine) or _pool_recognizer(request) is not None


async def _recognizer(request: Request, engine: EngineClient) -> EngineClient:
    if _hears(engine):
        return engine
    return await engine_for(request, _pool_recognizer(request), TRANSCRIPTION)


def _hears(engine: EngineClient) -> bool:
    ready = engine.ready_info
    return ready is not None and "transcribe" in [str(c) for c in ready.capabilities]


def _pool_recognizer(request: Request) -> str | None:
    """The models file's first transcription model, if it has one."""
    pool = request.app.state.pool
    if pool is None:
        return None
    return next((m.id for m in pool.served_models() if TRANSCRIPTION in m.kinds), None)


def spoken_answers(request: Request) -> SpokenAnswers:
    """The app's spoken answers by audio id, made on first use."""
    state = request.app.state
    answers = getattr(state, "spoken_answers", None)
    if answers is None:
        answers = state.spoken_answers = SpokenAnswers()
    return answers


async def _tts_engine(request: Request, engine: EngineClient) -> EngineClient:
    """The TTS model that speaks the answer: the one worker's, or a models file's first."""
    if request.app.state.pool is None:
        ready = engine.ready_info
        if ready is not None and ready.speech is None:
            raise invalid(
                "modalities",
                "audio output needs a TTS model: start the server with `--speech-model TTS`",
            )
        return engine
    name = first_model_of(request, SPEECH)
    if name is None:
        raise invalid("modalities", "audio output needs a TTS model in the models file")
    return await engine_for(request, name, SPEECH)


_RENAMED = {"voice": "audio.voice", "response_format": "audio.format", "ref_audio": "audio.voice"}


def _voice(request: Request, tts: EngineClient, req: GenerationRequest) -> Voice:
    """The speech inputs every phrase is spoken with: the speech route's voice rules (presets,
    OpenAI's names, saved voices; an unknown voice refused there), its errors naming
    `audio.voice` / `audio.format`."""
    audio = speech_model(tts)
    out = req.audio_out
    assert out is not None
    if described_only(audio):
        raise described_voice_error(audio, "audio.voice", "chat audio output")
    fields = {
        "model": audio.model,
        "voice": {"id": out.voice} if out.voice_by_id else out.voice,
        "response_format": audio_out.SPEECH_FORMATS[out.format],
    }
    try:
        voice = phrase_voice(request, audio, fields)
    except APIError as exc:
        if exc.param in _RENAMED:
            exc.message = exc.message.replace(f"`{exc.param}`", f"`{_RENAMED[exc.param]}`")
            exc.param = _RENAMED[exc.param]
        raise
    return voice


TALKER_RATE = 24000  # Qwen3-Omni's code2wav
# Fields the talker's thinker loop (mlx-vlm's generate_stream) cannot apply: worker/vision/talker.py.
_NOT_WITH_TALKER = {
    "stop": "stop strings (the talker would speak past them)",
    "logprobs": "logprobs",
    "response_format": "a response format (a grammar)",
    "logit_bias": "logit_bias",
    "presence_penalty": "penalties",
    "frequency_penalty": "penalties",
    "repetition_penalty": "penalties",
}


def _talker_speaker(engine: EngineClient, req: GenerationRequest, body: dict) -> str | None:
    """The speaker of the chat model's own talker that answers (Qwen3-Omni with audio
    output): the voice by name, or one of OpenAI's names (female: Chelsie, male: Ethan);
    None when the model has no talker (a TTS model speaks instead)."""
    ready = engine.ready_info
    speakers = ready.text.talker_speakers if ready is not None and ready.text else []
    if not speakers:
        return None
    for field, what in _NOT_WITH_TALKER.items():
        if body.get(field) not in (None, [], {}, False):
            raise unsupported(field, f"{what} with the model's own voice")
    choice = req.inputs.tool_choice if isinstance(req.inputs, ChatInputs) else None
    if choice == "required" or isinstance(choice, dict):
        raise unsupported("tool_choice", "a forced tool call with the model's own voice")
    out = req.audio_out
    assert out is not None
    by_name = {s.lower(): s for s in speakers}
    wanted = str(out.voice).lower()
    if not out.voice_by_id and wanted in by_name:
        return by_name[wanted]
    if not out.voice_by_id and wanted in OPENAI_VOICES:
        default = "chelsie" if wanted in FEMALE else "ethan"
        return by_name.get(default, speakers[0])
    raise invalid(
        "audio.voice",
        f"`audio.voice` {out.voice!r} is not a speaker of `{engine.model_name}`'s own talker "
        f"({', '.join(speakers)}, or one of OpenAI's voice names)",
    )


async def _spoken(
    request: Request, engine: EngineClient, req: GenerationRequest, response_id: str,
    created: int, model: str, body: dict,
) -> Response:  # fmt: skip
    lifecycle.check_max_tokens(engine, req)
    talker = _talker_speaker(engine, req, body)
    if talker is not None:  # the model speaks for itself
        tts, voice = engine, Voice(None, TALKER_RATE, talker)
    else:
        tts = await _tts_engine(request, engine)
        voice = _voice(request, tts, req)
    answers = spoken_answers(request)
    if req.stream:
        head = {"id": response_id, "object": "chat.completion.chunk", "created": created,
                "model": model}  # fmt: skip
        return audio_out.stream(request, engine, tts, req, voice, head, answers)
    spoken = await audio_out.complete(request, engine, tts, req, voice)
    assert req.audio_out is not None
    choice = choice_of(spoken.output)
    choice["message"]["content"] = None  # the text is the audio's transcript, as in OpenAI
    choice["message"]["audio"] = await audio_out.audio_body(spoken, req.audio_out.format, answers)
    return JSONResponse(
        {
            "id": response_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [choice],
            "usage": usage_dict(spoken.output.usage or Usage(0, 0)),
        }
    )
