"""The field tables of `/v1/messages` and `/v1/messages/count_tokens`: every field Anthropic
defines (and the sampling extensions), each honoured, accepted with no local meaning, or
refused with a 400 naming it. gateway/api/anthropic_messages/requests.py checks bodies against them and
/openapi.json shows them.
"""

from __future__ import annotations

from gateway.api.anthropic_messages.context_edits import parse_edits
from gateway.http.errors import invalid, unsupported
from gateway.schema import field as s
from gateway.schema import readers as f
from gateway.schema.field import Check, Field
from gateway.schema.request import RequestSchema

MAX_STOP_SEQUENCES = 16


def _server_side(what: str) -> Check:
    """Server-side features, refused unless absent, null or empty."""

    def check(body: dict, name: str) -> None:
        if body.get(name) not in (None, []):
            raise unsupported(name, what)

    return check


def _fallback_token(body: dict, name: str) -> None:
    if body.get(name) is not None and not isinstance(body[name], (str, dict)):
        raise invalid(name, f"`{name}` must be a string or object")


def _fallbacks(body: dict, name: str) -> None:
    value = body.get(name)
    if value is not None and value != "default" and not isinstance(value, list):
        raise invalid(name, f"`{name}` must be 'default' or an array of models")


_BLOCK = {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}}}
_TEXT_BLOCK = {
    "type": "object",
    "required": ["type", "text"],
    "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
}
_CONTENT = {"anyOf": [{"type": "string"}, {"type": "array", "items": _BLOCK}]}
MESSAGE = {
    "anyOf": [
        {
            "type": "object",
            "required": ["role", "content"],
            "properties": {"role": {"enum": ["user", "assistant"]}, "content": _CONTENT},
        },
        {
            "type": "object",
            "required": ["role", "content"],
            "description": "A system turn (beta per-turn-control), as Claude Code sends them "
            "(one with only an output_config and no content is accepted too, and adds nothing).",
            "properties": {
                "role": {"const": "system"},
                "content": {"anyOf": [{"type": "string"}, {"type": "array", "items": _TEXT_BLOCK}]},
                "clear_at": {
                    "enum": ["never", "next_user_message", None],
                    "description": "next_user_message: shown to the user turn it follows only.",
                },
                "output_config": {
                    "type": "object",
                    "properties": {"effort": {"type": "string"}},
                    "description": "The turn's effort (accepted, as the top-level one).",
                },
            },
        },
    ]
}
TOOL = {
    "type": "object",
    "required": ["name", "input_schema"],
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "input_schema": {"type": "object"},
    },
}

# The fields that shape the prompt: what count_tokens counts.
_PROMPT: dict[str, Field] = {
    "model": s.string("The served model's id or an alias.", minLength=1),
    "messages": s.structure(
        {"type": "array", "items": MESSAGE, "minItems": 1},
        "The conversation: text, image (if the model takes them), tool_use, tool_result and "
        "thinking blocks.",
    ),
    "system": s.structure(
        {"anyOf": [{"type": "string"}, {"type": "array", "items": _TEXT_BLOCK}]},
        "System prompt. Claude Code's `x-anthropic-billing-header: ...;` line at its very start "
        "is billing metadata and is left out of the prompt.",
    ),
    "tools": s.structure({"type": "array", "items": TOOL}, "Client tools the model may call."),
    "tool_choice": s.structure(
        {
            "type": "object",
            "required": ["type"],
            "properties": {
                "type": {"enum": ["auto", "any", "tool", "none"]},
                "name": {"type": "string"},
                "disable_parallel_tool_use": {"type": "boolean"},
            },
        },
        "auto, any (a call is required), tool (this one), none.",
    ),
    "thinking": s.structure(
        {
            "type": "object",
            "required": ["type"],
            "properties": {
                "type": {"enum": ["enabled", "adaptive", "disabled"]},
                "budget_tokens": {"type": "integer", "minimum": 1},
                "display": {"enum": ["summarized", "omitted"]},
            },
        },
        "Turns the template's thinking on or off; budget_tokens caps it.",
    ),
    "output_config": s.structure(
        {
            "type": "object",
            "properties": {
                "format": {
                    "type": "object",
                    "required": ["type", "schema"],
                    "properties": {"type": {"const": "json_schema"}, "schema": {"type": "object"}},
                },
                "effort": {"type": "string"},
                "task_budget": {"type": "object"},
            },
        },
        "format: JSON output by constrained decoding; effort reaches the template as "
        "`reasoning_effort` (GPT-OSS); task_budget is accepted.",
    ),
    "context_management": s.structure(
        {"type": "object"},
        "Edits applied before the prompt is built: clear old thinking or tool results.",
        lambda body, name: parse_edits(body.get(name)),
    ),
    "chat_template_kwargs": s.obj("Extension: passed to the chat template."),
    "cache_control": s.accepted(s.obj(), "The prefix cache is automatic."),
    "speed": s.accepted(s.string()),
    "user_profile_id": s.accepted(s.string()),
    "workspace_id": s.accepted(s.string()),
    "billing_policy": s.accepted(s.obj()),
    "compaction": s.refused("Server-side compaction.", _server_side("server-side compaction")),
    "mcp_servers": s.refused(
        "MCP servers called by the server (an empty list is accepted).",
        _server_side("MCP servers called by the server"),
        {"type": "array", "maxItems": 0},
    ),
}

COUNT = RequestSchema(_PROMPT, required=("model", "messages"))

CREATE = RequestSchema(
    {
        **_PROMPT,
        "max_tokens": s.integer("Tokens to generate at most.", 1),
        "stop_sequences": s.structure(
            {"type": "array", "items": {"type": "string", "minLength": 1}},
            f"Up to {MAX_STOP_SEQUENCES} strings that end the output.",
        ),
        "stream": s.boolean("Server-sent events in Anthropic's event shapes."),
        "temperature": s.number("0 is greedy.", 0, 1),
        "top_p": s.number("", 0, 1, lo_open=True),
        "top_k": s.integer("", 0),
        "min_p": s.number("Extension.", 0, 1),
        "repetition_penalty": s.number("Extension.", 0, None, lo_open=True),
        "seed": s.integer("Extension: same seed, same output.", *f.SEED_RANGE),
        "logit_bias": s.structure(
            {"type": "object", "additionalProperties": {"type": "number"}},
            "Extension: token id -> bias in [-100, 100].",
            lambda b, n: f.logit_bias(b),
        ),
        "metadata": s.accepted(s.obj()),
        "service_tier": s.accepted(s.string()),
        "diagnostics": s.accepted(s.obj()),
        "inference_geo": s.accepted(s.string()),
        "fallbacks": s.accepted(
            s.structure({"anyOf": [{"const": "default"}, {"type": "array"}]}, "", _fallbacks),
            "No model here declines a request, so no fallback runs.",
        ),
        "fallback_credit_token": s.accepted(
            s.structure({"anyOf": [{"type": "string"}, {"type": "object"}]}, "", _fallback_token)
        ),
        "container": s.refused("Server-side containers.", _server_side("server-side containers")),
        "thread": s.refused(
            "Server-held conversation threads.", _server_side("server-held conversation threads")
        ),
    },
    required=("model", "messages", "max_tokens"),
)
