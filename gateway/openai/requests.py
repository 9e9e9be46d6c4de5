"""Parse OpenAI chat-completions and completions bodies into what the engine takes.

Field policy (never silently ignore what changes the output): every top-level field is either
honoured (it reaches the worker's inputs or SamplingParams), accepted because it has no local
meaning, accepted only at its no-op value (e.g. `functions: []`) and otherwise a 400 "not
supported" naming it, or unknown: a 400 naming it. The tables in gateway/openai/surface.py say
which, with each field's type and range; a body is checked against them first. Combinations this server cannot serve are
400s naming one of their fields. When both `max_tokens` and `max_completion_tokens` are given
they must agree (else 400 naming `max_tokens`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.chat.request import AudioOut, GenerationRequest
from gateway.chat.structured import openai_response_format
from gateway.http.errors import invalid, unknown_field, unsupported
from gateway.media.parts import MediaCollector
from gateway.openai import fields as f
from gateway.openai.messages import normalize_messages
from gateway.openai.surface import AUDIO_FORMATS, CHAT, COMPLETION, NO_THINKING_EFFORTS
from gateway.openai.tools import parse_tool_fields
from protocol.inputs import ChatInputs, CompleteInputs

__all__ = ["GenerationRequest", "parse_chat", "parse_completion", "normalize_prompt"]


def model_of(body: dict) -> str:
    model = f.string(body, "model")
    if not model:
        raise invalid("model", "`model` is required")
    return model


def _n(body: dict) -> int:
    return f.integer(body, "n") or 1


def _template_kwargs(body: dict) -> dict[str, Any]:
    kwargs = dict(f.obj(body, "chat_template_kwargs") or {})
    effort = f.string(body, "reasoning_effort")
    if effort is not None:
        # The template's own switch; an explicit chat_template_kwargs value wins.
        kwargs.setdefault("enable_thinking", effort not in NO_THINKING_EFFORTS)
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
    sampling.constraint = openai_response_format(body.get("response_format"))
    inputs = ChatInputs(
        messages=messages,
        sampling=sampling,
        chat_template_kwargs=_template_kwargs(body),
        **parse_tool_fields(body),
    )
    if sampling.constraint is not None and inputs.tools:
        if (inputs.tool_choice or "auto") != "none":
            raise unsupported(
                "response_format",
                "a JSON response format together with callable tools; set tool_choice 'none'",
            )
    stream, include_usage = f.stream_flags(body)
    n = _n(body)
    return GenerationRequest(
        model=model,
        inputs=inputs,
        stream=stream,
        include_usage=include_usage,
        n=n,
        media=tuple(media.items),
        audio_out=_audio_out(body, stream, n),
    )


def parse_completion(body: dict, default_max_tokens: int) -> GenerationRequest:
    """A `/v1/completions` body -> op "complete" inputs + sampling, or a 400 naming a field."""
    COMPLETION.check(body)
    model = model_of(body)
    prompt = normalize_prompt(body.get("prompt"))
    n = _n(body)
    best_of = f.integer(body, "best_of", 1)
    if best_of is not None and best_of != n:
        raise unsupported("best_of", "a value other than n (server-side ranking of candidates)")
    if f.string(body, "suffix"):
        raise unsupported("suffix", "fill-in-the-middle: the served models have none")
    max_tokens = f.integer(body, "max_tokens", 1)
    sampling = f.sampling_params(body, max_tokens or default_max_tokens)
    sampling.logprobs = f.integer(body, "logprobs")
    echo = None
    if f.boolean(body, "echo"):
        if not isinstance(prompt, str):
            raise unsupported("echo", "with a prompt of token ids")
        if sampling.logprobs is not None:
            raise unsupported("echo", "together with logprobs (prompt-token logprobs)")
        echo = prompt
    stream, include_usage = f.stream_flags(body)
    return GenerationRequest(
        model=model,
        inputs=CompleteInputs(prompt=prompt, sampling=sampling),
        stream=stream,
        include_usage=include_usage,
        n=n,
        echo=echo,
    )


def _is_token_ids(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value
    )


def normalize_prompt(prompt: Any) -> str | list[int]:
    """A string, a list of token ids, or a one-element list of either."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    elif isinstance(prompt, list) and prompt and all(isinstance(p, str | list) for p in prompt):
        raise unsupported("prompt", "more than one prompt per request")
    if isinstance(prompt, str):
        return prompt
    if _is_token_ids(prompt) and prompt:
        return prompt
    raise invalid(
        "prompt",
        "`prompt` must be a string, a non-empty array of token ids (integers >= 0), "
        "or a one-element array of either",
    )
