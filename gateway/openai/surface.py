"""The field tables of `/v1/chat/completions` and `/v1/completions`: every field OpenAI defines
(and vLLM's sampling extensions), each honoured, accepted with no local meaning, accepted only
at its no-op values, or refused with a 400 naming it. The parsers check bodies against these
tables (gateway/openai/requests.py) and /openapi.json shows them.
"""

from __future__ import annotations

from typing import Any

from gateway.http.errors import invalid, unsupported
from gateway.openai import fields as f
from gateway.schema import field as s
from gateway.schema.field import Check, Field
from gateway.schema.request import RequestSchema

MAX_N = 16  # choices per request: each is a worker request of its own
MAX_TOP_LOGPROBS = 20  # OpenAI's limit
# `reasoning_effort` values that turn the template's thinking off; the others turn it on.
NO_THINKING_EFFORTS = ("none", "minimal")
EFFORTS = (*NO_THINKING_EFFORTS, "low", "medium", "high", "xhigh")


def _only(*accepted: Any) -> Check:
    """A check for a field accepted only at values that do not change the output."""

    def check(body: dict, name: str) -> None:
        value = body.get(name)
        if value is not None and value not in accepted:
            raise unsupported(name, f"only {' or '.join(repr(a) for a in accepted)}")

    return check


def _modalities(body: dict, name: str) -> None:
    value = f.array(body, name)
    for item in value or ():
        if item not in ("text", "audio"):
            raise invalid(name, f"`{name}` may hold 'text' and 'audio', got {item!r}")


AUDIO_FORMATS = ("wav", "mp3", "flac", "opus", "aac", "pcm16")
AUDIO = {
    "type": "object",
    "required": ["voice", "format"],
    "properties": {
        "voice": {
            "anyOf": [
                {"type": "string"},
                {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
            ]
        },
        "format": {"enum": list(AUDIO_FORMATS)},
    },
    "additionalProperties": False,
}


_TEXT_PART = {
    "type": "object",
    "required": ["type", "text"],
    "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
}
_MEDIA_PART = {
    "type": "object",
    "required": ["type"],
    "properties": {
        "type": {"enum": ["image_url", "input_audio"]},
        "image_url": {
            "type": "object",
            "properties": {"url": {"type": "string"}, "detail": {"type": "string"}},
        },
        "input_audio": {
            "type": "object",
            "properties": {"data": {"type": "string"}, "format": {"type": "string"}},
        },
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
RESPONSE_FORMAT = {
    "anyOf": [
        {
            "type": "object",
            "required": ["type"],
            "properties": {"type": {"enum": ["text", "json_object"]}},
            "additionalProperties": False,
        },
        {
            "type": "object",
            "required": ["type", "json_schema"],
            "properties": {
                "type": {"const": "json_schema"},
                "json_schema": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string"},
                        "description": {"type": "string"},
                        "schema": {"type": "object"},
                        "strict": {"type": ["boolean", "null"]},
                    },
                    "additionalProperties": False,
                },
            },
            "additionalProperties": False,
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

# The sampling fields both APIs honour through SamplingParams (f.sampling_params reads them).
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
}

STREAM_OPTIONS = s.obj(
    "Only with `stream: true`.",
    {"include_usage": {"type": "boolean"}, "include_obfuscation": {"type": "boolean"}},
)

# Accepted with no local meaning: type-checked, then dropped.
_NO_OP: dict[str, Field] = {
    "user": s.accepted(s.string()),
    "store": s.accepted(s.boolean(), "Nothing is stored for chat completions."),
    "metadata": s.accepted(s.obj()),
    "service_tier": s.accepted(s.string()),
    "prompt_cache_key": s.accepted(s.string(), "The prefix cache is automatic."),
    "prompt_cache_retention": s.accepted(s.string()),
    "safety_identifier": s.accepted(s.string()),
    "prompt_cache_options": s.accepted(
        s.obj("", {"ttl": {"type": "string"}, "mode": {"type": "string"}}),
        "The prefix cache keeps entries by its own LRU budget.",
    ),
}

CHAT = RequestSchema(
    {
        "model": s.string("The served model's id or an alias.", minLength=1),
        "messages": s.structure(
            {"type": "array", "items": MESSAGE, "minItems": 1},
            "The conversation. Image and audio parts need a model that takes them.",
        ),
        "stream": s.boolean("Server-sent events, ending with `data: [DONE]`."),
        "stream_options": STREAM_OPTIONS,
        "max_tokens": s.integer("Tokens to generate at most (default: --max-tokens).", 1),
        "max_completion_tokens": s.integer("As max_tokens; both given must agree.", 1),
        "n": s.integer("Choices to generate.", 1, MAX_N),
        "chat_template_kwargs": s.obj("Extension: passed to the chat template."),
        "tools": s.structure(
            {"type": "array", "items": FUNCTION_TOOL}, "Function tools the model may call."
        ),
        "tool_choice": s.structure(TOOL_CHOICE, "none, auto, required, or one named function."),
        "parallel_tool_calls": s.boolean("false: at most one call per turn."),
        "logprobs": s.boolean("Log probabilities of the output tokens."),
        "top_logprobs": s.integer("Alternatives per token; needs logprobs.", 0, MAX_TOP_LOGPROBS),
        "response_format": s.structure(
            RESPONSE_FORMAT, "JSON output, enforced by constrained decoding."
        ),
        "reasoning_effort": s.string(
            "none / minimal turn the template's thinking off, the others on.", EFFORTS
        ),
        **SAMPLING,
        **_NO_OP,
        "functions": s.limited(s.array(), _only([]), "Legacy functions: only []."),
        "function_call": s.limited(s.string(), _only("none", "auto"), "Legacy: none or auto."),
        "modalities": s.structure(
            {"type": "array", "items": {"enum": ["text", "audio"]}},
            "['text', 'audio']: the answer is also spoken by the served TTS model (needs `audio`).",
            _modalities,
        ),
        "audio": s.structure(
            AUDIO,
            "With modalities ['text', 'audio']: the voice (a preset, an OpenAI name, a saved "
            "voice) and the format (pcm16 when streaming: 16-bit PCM at the TTS model's rate).",
        ),
        "prediction": s.refused("Predicted outputs."),
        "web_search_options": s.refused("No web search."),
        "verbosity": s.refused(),
        "moderation": s.refused("No moderation model is served."),
    },
    required=("model", "messages"),
)

COMPLETION = RequestSchema(
    {
        "model": s.string("The served model's id or an alias.", minLength=1),
        "prompt": s.structure(
            {
                "anyOf": [
                    {"type": "string"},
                    {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1},
                    {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 1},
                ]
            },
            "A string, token ids, or a one-element array of either.",
        ),
        "stream": s.boolean("Server-sent events, ending with `data: [DONE]`."),
        "stream_options": STREAM_OPTIONS,
        "max_tokens": s.integer("Tokens to generate at most (default: --max-tokens).", 1),
        "n": s.integer("Choices to generate.", 1, MAX_N),
        "best_of": s.integer("Only equal to n (no server-side ranking).", 1),
        "echo": s.boolean("Prepend the prompt to the text (not with logprobs)."),
        "logprobs": s.integer("Alternatives per token.", 0, MAX_TOP_LOGPROBS),
        "suffix": s.string("Fill-in-the-middle: only empty (no served model has it)."),
        **SAMPLING,
        "user": s.accepted(s.string()),
    },
    required=("model", "prompt"),
)
