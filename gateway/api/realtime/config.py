"""The session's settings, changed by `session.update` (and, for one response, by
`response.create`'s `response`), in the GA shape or the beta one (both are read; the session
object is written in the shape of the interface the client chose).

Honoured: instructions, output modalities (text, or audio with its transcript), the voice and
its speed, input and output audio format (PCM16 at 24 kHz, the only one served; G.711 is
refused), input transcription (model, language, prompt), `turn_detection` (`server_vad` with
threshold, prefix padding, silence duration, create_response, interrupt_response; or null),
function tools and tool_choice, max output tokens, and (beta) temperature. Accepted with no
local meaning: tracing, metadata, an echoed id / object / expires_at. Refused, naming the
field: semantic_vad, noise reduction, idle timeouts, MCP tools, prompts (stored prompts are
OpenAI's), `truncation` other than "disabled" (a conversation past the context is an error
here, not silently cut).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

from gateway.api.realtime.names import Names
from gateway.api.realtime.vad import TurnSettings
from gateway.api.realtime.wire import EventError

RATE = 24000
DEFAULT_VOICE = "alloy"
MAX_INSTRUCTIONS = 65536
ACCEPTED = frozenset({"id", "object", "expires_at", "tracing", "client_secret", "metadata"})


@dataclass(slots=True)
class TurnDetection:
    settings: TurnSettings = field(default_factory=TurnSettings)
    create_response: bool = True
    interrupt_response: bool = True


@dataclass(slots=True)
class SessionConfig:
    model: str
    instructions: str = ""
    audio_out: bool = True  # output modalities: audio (with its transcript), or text
    voice: str = DEFAULT_VOICE
    speed: float | None = None
    transcription: dict[str, Any] | None = None  # {model, language, prompt}
    turn_detection: TurnDetection | None = field(default_factory=TurnDetection)
    tools: list[dict[str, Any]] = field(default_factory=list)  # chat-completions tools
    tool_choice: Any = "auto"  # chat-completions tool_choice
    max_output_tokens: int | None = None  # None: "inf" (the server's default)
    temperature: float | None = None

    def copy(self) -> SessionConfig:
        return copy.deepcopy(self)


# -- reading ---------------------------------------------------------------------------------


def _obj(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise EventError(f"`{param}` must be an object", param)
    return value


def _keys(value: dict[str, Any], allowed: set[str] | frozenset[str], param: str) -> None:
    for key in value:
        if key not in allowed and key not in ACCEPTED:
            raise EventError(
                f"unknown field `{param}.{key}`", f"{param}.{key}", "unknown_parameter"
            )


def _number(value: Any, param: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise EventError(f"`{param}` must be a number", param)
    if not low <= value <= high:
        raise EventError(f"`{param}` must be between {low} and {high}", param)
    return float(value)


def _integer(value: Any, param: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EventError(f"`{param}` must be an integer", param)
    if not low <= value <= high:
        raise EventError(f"`{param}` must be between {low} and {high}", param)
    return value


def _string(value: Any, param: str, limit: int = 4096) -> str:
    if not isinstance(value, str):
        raise EventError(f"`{param}` must be a string", param)
    if len(value) > limit:
        raise EventError(f"`{param}` may be at most {limit} characters", param)
    return value


def _format(value: Any, param: str) -> None:
    """PCM16 at 24 kHz: GA {"type": "audio/pcm", "rate": 24000}, beta "pcm16"."""
    if value == "pcm16":
        return
    if isinstance(value, dict):
        _keys(value, {"type", "rate"}, param)
        if value.get("type") == "audio/pcm" and value.get("rate", RATE) == RATE:
            return
    raise EventError(
        f'`{param}` must be PCM16 at 24 kHz ({{"type": "audio/pcm", "rate": 24000}}, or '
        '"pcm16"): G.711 and other rates are not served',
        param,
        "unsupported_audio_format",
    )


def _modalities(value: Any, param: str) -> bool:
    """Whether the response speaks: ["audio"] (GA), ["text", "audio"] (beta), or ["text"]."""
    if not isinstance(value, list) or not value or not set(value) <= {"text", "audio"}:
        raise EventError(f'`{param}` must be ["text"] or ["audio"] (or ["text", "audio"])', param)
    return "audio" in value


def _transcription(value: Any, param: str) -> dict[str, Any] | None:
    if value is None:
        return None
    value = _obj(value, param)
    _keys(value, {"model", "language", "prompt"}, param)
    out = {}
    for key in ("model", "language", "prompt"):
        if value.get(key) is not None:
            out[key] = _string(value[key], f"{param}.{key}")
    return out


def _turn_detection(value: Any, param: str, current: TurnDetection | None) -> TurnDetection | None:
    if value is None:
        return None
    value = _obj(value, param)
    _keys(value, {"type", "threshold", "prefix_padding_ms", "silence_duration_ms",
                  "create_response", "interrupt_response", "idle_timeout_ms", "eagerness"},
          param)  # fmt: skip
    kind = value.get("type", "server_vad")
    if kind != "server_vad":
        raise EventError(
            f"`{param}.type` {kind!r} is not served: use \"server_vad\" (or null)",
            f"{param}.type", "unsupported_turn_detection",
        )  # fmt: skip
    if value.get("idle_timeout_ms") is not None:
        raise EventError("`idle_timeout_ms` is not supported", f"{param}.idle_timeout_ms")
    out = copy.deepcopy(current) if current is not None else TurnDetection()
    s = out.settings
    if "threshold" in value:
        s.threshold = _number(value["threshold"], f"{param}.threshold", 0.0, 1.0)
    if "prefix_padding_ms" in value:
        s.prefix_padding_ms = _integer(value["prefix_padding_ms"], f"{param}.prefix_padding_ms",
                                       0, 10_000)  # fmt: skip
    if "silence_duration_ms" in value:
        s.silence_duration_ms = _integer(
            value["silence_duration_ms"], f"{param}.silence_duration_ms", 0, 10_000
        )
    for key in ("create_response", "interrupt_response"):
        if key in value:
            if not isinstance(value[key], bool):
                raise EventError(f"`{param}.{key}` must be a boolean", f"{param}.{key}")
            setattr(out, key, value[key])
    return out


def _tools(value: Any, param: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise EventError(f"`{param}` must be an array", param)
    tools = []
    for i, tool in enumerate(value):
        tool = _obj(tool, f"{param}[{i}]")
        if tool.get("type", "function") != "function":
            raise EventError(
                f"`{param}[{i}].type` {tool.get('type')!r}: only function tools are served",
                f"{param}[{i}].type", "unsupported_tool",
            )  # fmt: skip
        _keys(tool, {"type", "name", "description", "parameters"}, f"{param}[{i}]")
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise EventError(f"`{param}[{i}].name` is required", f"{param}[{i}].name")
        function = {"name": name, "parameters": tool.get("parameters") or {"type": "object"}}
        if tool.get("description"):
            function["description"] = _string(tool["description"], f"{param}[{i}].description")
        tools.append({"type": "function", "function": function})
    return tools


def _tool_choice(value: Any, param: str) -> Any:
    if value in ("auto", "none", "required"):
        return value
    if isinstance(value, dict) and value.get("type") == "function":
        name = value.get("name") or (value.get("function") or {}).get("name")
        if isinstance(name, str) and name:
            return {"type": "function", "function": {"name": name}}
    raise EventError(
        f'`{param}` must be "auto", "none", "required" or {{"type": "function", "name": ...}}',
        param,
    )


def _max_tokens(value: Any, param: str) -> int | None:
    if value == "inf":
        return None
    return _integer(value, param, 1, 1 << 20)


def _refuse_unless(value: Any, allowed: tuple, param: str, why: str) -> None:
    if value not in allowed:
        raise EventError(f"`{param}`: {why}", param, "unsupported_parameter")


# The fields of a session (GA and beta names) and of a response.create's `response`.
SESSION_FIELDS = frozenset({
    "type", "model", "instructions", "output_modalities", "modalities", "audio", "voice",
    "input_audio_format", "output_audio_format", "input_audio_transcription", "turn_detection",
    "input_audio_noise_reduction", "tools", "tool_choice", "max_output_tokens",
    "max_response_output_tokens", "temperature", "speed", "truncation", "prompt", "include",
})  # fmt: skip
RESPONSE_FIELDS = frozenset({
    "instructions", "output_modalities", "modalities", "audio", "voice", "output_audio_format",
    "tools", "tool_choice", "max_output_tokens", "max_response_output_tokens", "temperature",
    "conversation", "input", "prompt",
})  # fmt: skip


def apply(config: SessionConfig, body: Any, param: str, fields: frozenset[str]) -> None:
    """Apply a session (or a response's overrides) to `config`, in place; EventError naming
    the first field it cannot take (and then nothing is changed: callers pass a copy)."""
    body = _obj(body, param)
    _keys(body, fields, param)
    p = param
    if "type" in body and body["type"] != "realtime":
        raise EventError(f"`{p}.type` must be \"realtime\" (transcription sessions are not served)",
                         f"{p}.type")  # fmt: skip
    if body.get("model") not in (None, config.model):
        raise EventError(
            f"`{p}.model` cannot change within a session (it is {config.model!r}): connect "
            "with ?model=...", f"{p}.model",
        )  # fmt: skip
    if "instructions" in body:
        config.instructions = _string(body["instructions"], f"{p}.instructions", MAX_INSTRUCTIONS)
    for key in ("output_modalities", "modalities"):
        if key in body:
            config.audio_out = _modalities(body[key], f"{p}.{key}")
    if "voice" in body:
        config.voice = _string(body["voice"], f"{p}.voice")
    if "speed" in body:
        config.speed = _number(body["speed"], f"{p}.speed", 0.25, 4.0)
    if "temperature" in body:
        config.temperature = _number(body["temperature"], f"{p}.temperature", 0.0, 2.0)
    for key in ("input_audio_format", "output_audio_format"):
        if key in body:
            _format(body[key], f"{p}.{key}")
    if "input_audio_transcription" in body:
        config.transcription = _transcription(body["input_audio_transcription"],
                                              f"{p}.input_audio_transcription")  # fmt: skip
    if "turn_detection" in body:
        config.turn_detection = _turn_detection(body["turn_detection"], f"{p}.turn_detection",
                                                config.turn_detection)  # fmt: skip
    if body.get("input_audio_noise_reduction") is not None:
        raise EventError("noise reduction is not served", f"{p}.input_audio_noise_reduction")
    if "audio" in body:
        _audio(config, body["audio"], f"{p}.audio", fields is RESPONSE_FIELDS)
    if "tools" in body:
        config.tools = _tools(body["tools"], f"{p}.tools")
    if "tool_choice" in body:
        config.tool_choice = _tool_choice(body["tool_choice"], f"{p}.tool_choice")
    for key in ("max_output_tokens", "max_response_output_tokens"):
        if key in body:
            config.max_output_tokens = _max_tokens(body[key], f"{p}.{key}")
    if "truncation" in body:
        _refuse_unless(
            body["truncation"],
            ("disabled",),
            f"{p}.truncation",
            'only "disabled": a conversation past the context is an error here',
        )
    if "prompt" in body:
        _refuse_unless(body["prompt"], (None,), f"{p}.prompt", "stored prompts are OpenAI's")
    if "include" in body:
        _refuse_unless(body["include"], (None, []), f"{p}.include", "logprobs are not available")


def _audio(config: SessionConfig, value: Any, param: str, response_only: bool) -> None:
    value = _obj(value, param)
    _keys(value, {"output"} if response_only else {"input", "output"}, param)
    if "input" in value:
        audio_in = _obj(value["input"], f"{param}.input")
        q = f"{param}.input"
        _keys(audio_in, {"format", "transcription", "turn_detection", "noise_reduction"}, q)
        if "format" in audio_in:
            _format(audio_in["format"], f"{q}.format")
        if "transcription" in audio_in:
            config.transcription = _transcription(audio_in["transcription"], f"{q}.transcription")
        if "turn_detection" in audio_in:
            config.turn_detection = _turn_detection(audio_in["turn_detection"],
                                                    f"{q}.turn_detection", config.turn_detection)  # fmt: skip
        if audio_in.get("noise_reduction") is not None:
            raise EventError("noise reduction is not served", f"{q}.noise_reduction")
    if "output" in value:
        out = _obj(value["output"], f"{param}.output")
        q = f"{param}.output"
        _keys(out, {"format", "voice", "speed"}, q)
        if "format" in out:
            _format(out["format"], f"{q}.format")
        if "voice" in out:
            config.voice = _string(out["voice"], f"{q}.voice")
        if "speed" in out:
            config.speed = _number(out["speed"], f"{q}.speed", 0.25, 4.0)


# -- writing ---------------------------------------------------------------------------------


def _turn_object(turn: TurnDetection | None) -> dict[str, Any] | None:
    if turn is None:
        return None
    s = turn.settings
    return {
        "type": "server_vad",
        "threshold": s.threshold,
        "prefix_padding_ms": s.prefix_padding_ms,
        "silence_duration_ms": s.silence_duration_ms,
        "create_response": turn.create_response,
        "interrupt_response": turn.interrupt_response,
        "idle_timeout_ms": None,
    }


def _tool_objects(config: SessionConfig) -> list[dict[str, Any]]:
    return [{"type": "function", **tool["function"]} for tool in config.tools]


def _tool_choice_object(config: SessionConfig) -> Any:
    choice = config.tool_choice
    if isinstance(choice, dict):
        return {"type": "function", "name": choice["function"]["name"]}
    return choice


def session_object(config: SessionConfig, session_id: str, names: Names) -> dict[str, Any]:
    """The session as session.created / session.updated carry it."""
    max_tokens = "inf" if config.max_output_tokens is None else config.max_output_tokens
    if names.beta:
        return {
            "id": session_id,
            "object": "realtime.session",
            "model": config.model,
            "modalities": ["text", "audio"] if config.audio_out else ["text"],
            "instructions": config.instructions,
            "voice": config.voice,
            "input_audio_format": "pcm16",
            "output_audio_format": "pcm16",
            "input_audio_transcription": config.transcription,
            "turn_detection": _turn_object(config.turn_detection),
            "tools": _tool_objects(config),
            "tool_choice": _tool_choice_object(config),
            "temperature": config.temperature if config.temperature is not None else 0.8,
            "max_response_output_tokens": max_tokens,
            "speed": config.speed or 1.0,
        }
    pcm = {"type": "audio/pcm", "rate": RATE}
    return {
        "type": "realtime",
        "object": "realtime.session",
        "id": session_id,
        "model": config.model,
        "output_modalities": ["audio"] if config.audio_out else ["text"],
        "instructions": config.instructions,
        "audio": {
            "input": {
                "format": pcm,
                "transcription": config.transcription,
                "turn_detection": _turn_object(config.turn_detection),
                "noise_reduction": None,
            },
            "output": {"format": pcm, "voice": config.voice, "speed": config.speed or 1.0},
        },
        "tools": _tool_objects(config),
        "tool_choice": _tool_choice_object(config),
        "max_output_tokens": max_tokens,
        "tracing": None,
        "truncation": "disabled",
        "prompt": None,
        "include": None,
    }
