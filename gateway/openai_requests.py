"""Parse OpenAI chat-completions and completions bodies into what the engine takes.

Field policy (never silently ignore what changes the output): every top-level field is either
honoured (it reaches the worker's inputs or SamplingParams), accepted because it has no local
meaning, accepted only at its no-op value (e.g. `logprobs: false`, `tools: []`) and otherwise a
400 "not supported" naming it, or unknown: a 400 naming it. When both `max_tokens` and
`max_completion_tokens` are given they must agree (else 400 naming `max_tokens`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway import openai_fields as f
from gateway.errors import invalid, unknown_field, unsupported
from protocol.messages import Op, SamplingParams


@dataclass(slots=True)
class GenerationRequest:
    op: str  # protocol Op.CHAT or Op.COMPLETE
    model: str
    inputs: dict[str, Any]
    sampling: SamplingParams
    stream: bool
    include_usage: bool


Check = Callable[[dict, str], None]


def _never(body: dict, name: str) -> None:
    if body.get(name) is not None:
        raise unsupported(name)


def _only(*accepted: Any) -> Check:
    """A field accepted only at values that do not change the output."""

    def check(body: dict, name: str) -> None:
        value = body.get(name)
        if value is not None and value not in accepted:
            raise unsupported(name, f"only {' or '.join(repr(a) for a in accepted)}")

    return check


def _typed(read: Callable[[dict, str], Any]) -> Check:
    def check(body: dict, name: str) -> None:
        read(body, name)

    return check


def _modalities(body: dict, name: str) -> None:
    value = f.array(body, name)
    if value is None:
        return
    for item in value:
        if item == "audio":
            raise unsupported(name, "audio output")
        if item != "text":
            raise invalid(name, f"`{name}` may hold only 'text', got {item!r}")


def _response_format(body: dict, name: str) -> None:
    value = f.obj(body, name)
    if value is None:
        return
    kind = value.get("type")
    if kind in ("json_object", "json_schema"):
        raise unsupported(name, f"type {kind!r}")
    if kind != "text":
        raise invalid(f"{name}.type", f"`{name}.type` must be 'text', got {kind!r}")


# Accepted with no local meaning: type-checked, then dropped.
_NO_OP: dict[str, Check] = {
    "user": _typed(f.string),
    "store": _typed(f.boolean),
    "metadata": _typed(f.obj),
    "service_tier": _typed(f.string),
    "prompt_cache_key": _typed(f.string),
    "prompt_cache_retention": _typed(f.string),
    "safety_identifier": _typed(f.string),
    "parallel_tool_calls": _typed(f.boolean),
}

_CHAT_CHECKS: dict[str, Check] = {
    **_NO_OP,
    "logprobs": _only(False),
    "tools": _only([]),
    "tool_choice": _only("none", "auto"),
    "functions": _only([]),
    "function_call": _only("none", "auto"),
    "modalities": _modalities,
    "response_format": _response_format,
    **dict.fromkeys(
        (
            "top_logprobs",
            "audio",
            "prediction",
            "web_search_options",
            "reasoning_effort",
            "verbosity",
        ),
        _never,
    ),
}

_CHAT_HONOURED = frozenset(
    {
        "model",
        "messages",
        "stream",
        "stream_options",
        "max_tokens",
        "max_completion_tokens",
        "n",
        "chat_template_kwargs",
        *f.SHARED_SAMPLING,
    }
)

_COMPLETION_CHECKS: dict[str, Check] = {
    "user": _typed(f.string),
    "best_of": lambda body, name: _best_of(body),
    "echo": _only(False),
    "logprobs": _never,
    "suffix": _never,
}

_COMPLETION_HONOURED = frozenset(
    {"model", "prompt", "stream", "stream_options", "max_tokens", "n", *f.SHARED_SAMPLING}
)


def _best_of(body: dict) -> None:
    value = f.integer(body, "best_of", 1)
    if value is not None and value > 1:
        raise unsupported("best_of", "more than one candidate")


def _check_fields(body: dict, honoured: frozenset[str], checks: dict[str, Check]) -> None:
    for name in body:
        if name not in honoured and name not in checks:
            raise unknown_field(name)
    for name, check in checks.items():
        if name in body:
            check(body, name)


def _model(body: dict) -> str:
    model = f.string(body, "model")
    if not model:
        raise invalid("model", "`model` is required")
    return model


def parse_chat(body: dict, default_max_tokens: int) -> GenerationRequest:
    """A `/v1/chat/completions` body -> op "chat" inputs + sampling, or a 400 naming a field."""
    _check_fields(body, _CHAT_HONOURED, _CHAT_CHECKS)
    model = _model(body)
    messages = normalize_messages(body.get("messages"))
    f.n_must_be_one(body)
    max_tokens = f.integer(body, "max_tokens", 1)
    max_completion = f.integer(body, "max_completion_tokens", 1)
    if max_tokens is not None and max_completion is not None and max_tokens != max_completion:
        raise invalid(
            "max_tokens",
            "`max_tokens` and `max_completion_tokens` differ: send only one of them",
        )
    template_kwargs = f.obj(body, "chat_template_kwargs") or {}
    stream, include_usage = f.stream_flags(body)
    return GenerationRequest(
        op=Op.CHAT,
        model=model,
        inputs={"messages": messages, "chat_template_kwargs": template_kwargs},
        sampling=f.sampling_params(body, max_completion or max_tokens or default_max_tokens),
        stream=stream,
        include_usage=include_usage,
    )


def parse_completion(body: dict, default_max_tokens: int) -> GenerationRequest:
    """A `/v1/completions` body -> op "complete" inputs + sampling, or a 400 naming a field."""
    _check_fields(body, _COMPLETION_HONOURED, _COMPLETION_CHECKS)
    model = _model(body)
    prompt = normalize_prompt(body.get("prompt"))
    f.n_must_be_one(body)
    max_tokens = f.integer(body, "max_tokens", 1)
    stream, include_usage = f.stream_flags(body)
    return GenerationRequest(
        op=Op.COMPLETE,
        model=model,
        inputs={"prompt": prompt},
        sampling=f.sampling_params(body, max_tokens or default_max_tokens),
        stream=stream,
        include_usage=include_usage,
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


_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
_UNSUPPORTED_ROLES = {"tool", "function"}
_UNSUPPORTED_PARTS = {"image_url", "input_audio", "file", "refusal", "audio", "video_url"}
_MESSAGE_KEYS = {"role", "content", "name"}
# Assistant-message fields that are fine only when empty: they carry tool calls or audio.
_ASSISTANT_EMPTY_ONLY = {"tool_calls": [], "function_call": None, "audio": None, "refusal": None}


def normalize_messages(messages: Any) -> list[dict[str, str]]:
    """OpenAI messages -> `[{"role", "content": str}]`; anything not representable is a 400."""
    if not isinstance(messages, list) or not messages:
        raise invalid("messages", "`messages` must be a non-empty array")
    return [_message(message, f"messages[{i}]") for i, message in enumerate(messages)]


def _message(message: Any, path: str) -> dict[str, str]:
    if not isinstance(message, dict):
        raise invalid(path, f"`{path}` must be an object")
    role = message.get("role")
    if role in _UNSUPPORTED_ROLES:
        raise unsupported(f"{path}.role", f"role {role!r}")
    if role not in _ROLES:
        raise invalid(
            f"{path}.role", f"`{path}.role` must be one of {sorted(_ROLES)}, got {role!r}"
        )
    for key, value in message.items():
        if key in _MESSAGE_KEYS:
            continue
        if role == "assistant" and key in _ASSISTANT_EMPTY_ONLY:
            if value not in (None, _ASSISTANT_EMPTY_ONLY[key]):
                raise unsupported(f"{path}.{key}")
            continue
        raise unknown_field(f"{path}.{key}")
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise invalid(f"{path}.name", f"`{path}.name` must be a string")
    return {"role": _ROLES[role], "content": _content(message.get("content"), f"{path}.content")}


def _content(content: Any, path: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid(path, f"`{path}` must be a string or an array of content parts")
    texts = []
    for j, part in enumerate(content):
        part_path = f"{path}[{j}]"
        if not isinstance(part, dict):
            raise invalid(part_path, f"`{part_path}` must be an object")
        kind = part.get("type")
        if kind in _UNSUPPORTED_PARTS:
            raise unsupported(f"{part_path}.type", f"content part type {kind!r}")
        if kind != "text":
            raise invalid(f"{part_path}.type", f"`{part_path}.type` must be 'text', got {kind!r}")
        for key in part:
            if key not in ("type", "text"):
                raise unknown_field(f"{part_path}.{key}")
        text = part.get("text")
        if not isinstance(text, str):
            raise invalid(f"{part_path}.text", f"`{part_path}.text` must be a string")
        texts.append(text)
    # Text parts are joined with newlines, as vLLM does for text-only content.
    return "\n".join(texts)
