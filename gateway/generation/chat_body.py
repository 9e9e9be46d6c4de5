"""An OpenAI chat-completions body: its field table (`CHAT`: every field OpenAI defines and
vLLM's sampling extensions) and its parser into a GenerationRequest. Shared:
`/v1/chat/completions` reads clients' bodies with it (gateway/api/chat_completions/), the
Realtime API its responses, which it builds as chat bodies.

Field policy (never silently ignore what changes the output): every top-level field is either
honoured (it reaches the worker's inputs or SamplingParams), accepted because it has no local
meaning, accepted only at its no-op value (e.g. `functions: []`) and otherwise a 400 "not
supported" naming it, or unknown: a 400 naming it. The table says which, with each field's type
and range; a body is checked against it first. Combinations this server cannot serve are 400s
naming one of their fields. When both `max_tokens` and `max_completion_tokens` are given they
must agree (else 400 naming `max_tokens`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.generation.openai_messages import normalize_messages
from gateway.generation.openai_tools import parse_tool_fields
from gateway.generation.request import AudioOut, GenerationRequest
from gateway.generation.structured import openai_response_format
from gateway.generation.vllm_structured import FIELDS as VLLM_STRUCTURED
from gateway.generation.vllm_structured import vllm_constraint
from gateway.http.errors import invalid, unknown_field, unsupported
from gateway.media.parts import MediaCollector
from gateway.schema import field as s
from gateway.schema import readers as f
from gateway.schema.field import Check, Field
from gateway.schema.openai_chat import (
    FUNCTION_TOOL,
    MAX_TOP_LOGPROBS,
    MESSAGE,
    SAMPLING,
    STREAM_OPTIONS,
    TOOL_CHOICE,
)
from gateway.schema.request import RequestSchema
from protocol.inputs import ChatInputs

MAX_N = 16  # choices per request: each is a worker request of its own
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
            {"type": "array", "items": FUNCTION_TOOL},
            "Function tools the model may call (and, an extension, `mcp` tools: README).",
        ),
        "tool_choice": s.structure(TOOL_CHOICE, "none, auto, required, or one named function."),
        "parallel_tool_calls": s.boolean("false: at most one call per turn."),
        "logprobs": s.boolean("Log probabilities of the output tokens."),
        "top_logprobs": s.integer("Alternatives per token; needs logprobs.", 0, MAX_TOP_LOGPROBS),
        "response_format": s.structure(
            RESPONSE_FORMAT, "JSON output, enforced by constrained decoding."
        ),
        "reasoning_effort": s.string(
            "none / minimal turn the template's thinking off, the others on; passed to the "
            "template as `reasoning_effort` (GPT-OSS's Reasoning: low / medium / high).",
            EFFORTS,
        ),
        **SAMPLING,
        **VLLM_STRUCTURED,
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


def model_of(body: dict) -> str:
    model = f.string(body, "model")
    if not model:
        raise invalid("model", "`model` is required")
    return model


def choice_count(body: dict) -> int:
    """`n`: how many choices to generate (default 1)."""
    return f.integer(body, "n") or 1


def _template_kwargs(body: dict) -> dict[str, Any]:
    kwargs = dict(f.obj(body, "chat_template_kwargs") or {})
    effort = f.string(body, "reasoning_effort")
    if effort is not None:
        # The template's own switch; an explicit chat_template_kwargs value wins.
        kwargs.setdefault("enable_thinking", effort not in NO_THINKING_EFFORTS)
        kwargs.setdefault("reasoning_effort", effort)  # what GPT-OSS's template reads
    return kwargs


def _chat_logprobs(body: dict) -> int | None:
    wanted = f.boolean(body, "logprobs")
    top = f.integer(body, "top_logprobs")
    if top is not None and not wanted:
        raise invalid("top_logprobs", "`top_logprobs` needs `logprobs: true`")
    return (top or 0) if wanted else None


def _audio_out(body: dict, stream: bool, n: int) -> AudioOut | None:
    """`modalities` with "audio" and its `audio: {voice, format}`, checked together."""
    audio = f.obj(body, "audio")
    if "audio" not in (body.get("modalities") or ()):
        if audio is not None:
            raise invalid("audio", "`audio` goes with `modalities: ['text', 'audio']`")
        return None
    if audio is None:
        raise invalid(
            "audio", "`modalities` asks for audio: `audio` must give `voice` and `format`"
        )
    for key in audio:
        if key not in ("voice", "format"):
            raise unknown_field(f"audio.{key}")
    fmt = audio.get("format")
    if fmt not in AUDIO_FORMATS:
        raise invalid("audio.format", f"`audio.format` must be one of {', '.join(AUDIO_FORMATS)}")
    if stream and fmt != "pcm16":
        raise invalid("audio.format", "a streamed answer's audio is `pcm16`, as in OpenAI")
    voice = audio.get("voice")
    by_id = isinstance(voice, dict)
    if by_id:
        voice = voice.get("id") if set(voice) == {"id"} else None
    if not isinstance(voice, str) or not voice:
        raise invalid("audio.voice", '`audio.voice` must be a voice name or {"id": voice id}')
    if n > 1:
        raise unsupported("n", "more than one choice with audio output")
    return AudioOut(voice, by_id, fmt)


def parse_chat(
    body: dict,
    default_max_tokens: int,
    media: MediaCollector | None = None,
    audio_transcripts: Callable[[str], str | None] | None = None,
) -> GenerationRequest:
    """A `/v1/chat/completions` body -> op "chat" inputs + sampling, or a 400 naming a field.
    `media` says which media the model accepts (default: none) and collects the parts;
    `audio_transcripts` turns an earlier spoken answer's `audio.id` into its transcript."""
    CHAT.check(body)
    return read_chat(body, default_max_tokens, media, audio_transcripts)


def read_chat(
    body: dict,
    default_max_tokens: int,
    media: MediaCollector | None = None,
    audio_transcripts: Callable[[str], str | None] | None = None,
) -> GenerationRequest:
    """parse_chat of a body that already passed `CHAT.check` (the chat completions route checks
    it before a model is loaded for it, then reads it once the engine is known)."""
    model = model_of(body)
    media = media if media is not None else MediaCollector()
    messages = normalize_messages(body.get("messages"), media, audio_transcripts)
    max_tokens = f.integer(body, "max_tokens", 1)
    max_completion = f.integer(body, "max_completion_tokens", 1)
    if max_tokens is not None and max_completion is not None and max_tokens != max_completion:
        raise invalid(
            "max_tokens",
            "`max_tokens` and `max_completion_tokens` differ: send only one of them",
        )
    sampling = f.sampling_params(body, max_completion or max_tokens or default_max_tokens)
    sampling.logprobs = _chat_logprobs(body)
    sampling.constraint = vllm_constraint(body, openai_response_format(body.get("response_format")))
    inputs = ChatInputs(
        messages=messages,
        sampling=sampling,
        chat_template_kwargs=_template_kwargs(body),
        **parse_tool_fields(body),
    )
    if sampling.constraint is not None and inputs.tools:
        if (inputs.tool_choice or "auto") != "none":
            named = getattr(sampling.constraint, "field", None) or "response_format"
            raise unsupported(
                named.split(".")[0],
                "an output constraint together with callable tools; set tool_choice 'none'",
            )
    stream, include_usage = f.stream_flags(body)
    n = choice_count(body)
    return GenerationRequest(
        model=model,
        inputs=inputs,
        stream=stream,
        include_usage=include_usage,
        n=n,
        media=tuple(media.items),
        audio_out=_audio_out(body, stream, n),
        max_tokens_field=(
            "max_completion_tokens" if max_completion else "max_tokens" if max_tokens else None
        ),
        time_limit=f.time_limit(body),
    )
