"""Typed Submit inputs, built from the dict shapes the tests read best."""

from __future__ import annotations

from typing import Any

from protocol.inputs import (
    ChatInputs,
    CompleteInputs,
    Constraint,
    JsonObject,
    JsonSchema,
    SamplingParams,
)


def sampling(max_tokens: int = 16, **fields: Any) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, **fields)


def chat(messages: list[dict[str, Any]], max_tokens: int = 16, **fields: Any) -> ChatInputs:
    """ChatInputs: `fields` are its own (tools, chat_template_kwargs, ...) or SamplingParams'."""
    own = {k: v for k, v in fields.items() if k in ChatInputs.__struct_fields__}
    rest = {k: v for k, v in fields.items() if k not in own}
    return ChatInputs(messages, sampling(max_tokens, **rest), **own)


def complete(prompt: str | list[int], max_tokens: int = 16, **fields: Any) -> CompleteInputs:
    return CompleteInputs(prompt, sampling(max_tokens, **fields))


def inputs_of(op: str, fields: dict[str, Any], **sampling_fields: Any) -> Any:
    """The inputs of a chat or complete Submit from its fields as a dict."""
    if op == "complete":
        return complete(fields["prompt"], **sampling_fields)
    return chat(**fields, **sampling_fields)


def constraint(spec: dict[str, Any] | Constraint | None) -> Constraint | None:
    """A response-format constraint from its OpenAI-like dict spelling."""
    if spec is None or not isinstance(spec, dict):
        return spec
    if spec["type"] == "json_object":
        return JsonObject()
    return JsonSchema(spec["schema"], spec.get("name"), spec.get("strict"))
