"""The JSON Schemas of OpenAI's chat format that several APIs' field tables share: messages,
function tools and `tool_choice`, the sampling fields and `stream_options` (chat completions and
completions, Responses, /tokenize, the Realtime API's chat turns)."""

from __future__ import annotations

from gateway.schema import field as s
from gateway.schema import readers as f
from gateway.schema.field import Field

MAX_TOP_LOGPROBS = 20  # OpenAI's limit

_TEXT_PART = {
    "type": "object",
    "required": ["type", "text"],
    "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
}
_MEDIA_PART = {
    "type": "object",
    "required": ["type"],
    "properties": {
        "type": {"enum": ["image_url", "input_audio", "audio_url"]},
        "image_url": {
            "type": "object",
            "properties": {"url": {"type": "string"}, "detail": {"type": "string"}},
        },
        "input_audio": {
            "type": "object",
            "properties": {"data": {"type": "string"}, "format": {"type": "string"}},
        },
        "audio_url": {"type": "object", "properties": {"url": {"type": "string"}}},
    },
}
_TOOL_CALL = {
    "type": "object",
    "required": ["id", "function"],
    "properties": {
        "id": {"type": "string"},
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "required": ["name", "arguments"],
            "properties": {"name": {"type": "string"}, "arguments": {"type": "string"}},
        },
    },
}
MESSAGE = {
    "type": "object",
    "required": ["role"],
    "properties": {
        "role": {"enum": ["system", "developer", "user", "assistant", "tool"]},
        "content": {
            "anyOf": [
                {"type": "string"},
                {"type": "array", "items": {"anyOf": [_TEXT_PART, _MEDIA_PART]}},
                {"type": "null"},
            ]
        },
        "name": {"type": "string"},
        "tool_calls": {"type": "array", "items": _TOOL_CALL},
        "tool_call_id": {"type": "string"},
        "reasoning_content": {"type": ["string", "null"]},
    },
}
FUNCTION_TOOL = {
    "type": "object",
    "required": ["type", "function"],
    "properties": {
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string"},
                "description": {"type": "string"},
                "parameters": {"type": "object"},
                "strict": {"type": ["boolean", "null"]},
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}
TOOL_CHOICE = {
    "anyOf": [
        {"enum": ["none", "auto", "required"]},
        {
            "type": "object",
            "required": ["type", "function"],
            "properties": {
                "type": {"const": "function"},
                "function": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {"name": {"type": "string"}},
                },
            },
        },
    ]
}
STOP = {
    "anyOf": [
        {"type": "string", "minLength": 1},
        {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "maxItems": f.MAX_STOP_SEQUENCES,
        },
    ]
}

# The sampling fields the OpenAI-style APIs honour through SamplingParams (f.sampling_params
# reads them).
MAX_TIMEOUT = 86400.0  # seconds: a request's own `timeout` at most

SAMPLING: dict[str, Field] = {
    "temperature": s.number("0 is greedy.", 0, 2),
    "top_p": s.number("Nucleus sampling.", 0, 1, lo_open=True),
    "stop": s.structure(
        STOP, "Up to 4 strings that end the output.", lambda b, n: f.stop_sequences(b)
    ),
    "seed": s.integer("Same seed, same output.", *f.SEED_RANGE),
    "presence_penalty": s.number("", -2, 2),
    "frequency_penalty": s.number("", -2, 2),
    "logit_bias": s.structure(
        {"type": "object", "additionalProperties": {"type": "number"}},
        "Token id -> bias in [-100, 100].",
        lambda b, n: f.logit_bias(b),
    ),
    # Extensions beyond the OpenAI schema that vLLM-style clients send through `extra_body`.
    "top_k": s.integer("Extension: sample from the k likeliest tokens (-1 or 0: off).", -1),
    "min_p": s.number("Extension: drop tokens below min_p times the likeliest.", 0, 1),
    "repetition_penalty": s.number("Extension: > 1 discourages repeats.", 0, None, lo_open=True),
    "timeout": s.number(
        "Extension: seconds the request may take; then it ends as max_tokens would "
        "(finish_reason length, with what it generated).",
        0,
        MAX_TIMEOUT,
        lo_open=True,
    ),
}

STREAM_OPTIONS = s.obj(
    "Only with `stream: true`.",
    {"include_usage": {"type": "boolean"}, "include_obfuscation": {"type": "boolean"}},
)
