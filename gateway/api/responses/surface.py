"""The field table of `POST /v1/responses`: every field OpenAI defines, each honoured, accepted
with no local meaning, accepted only at its no-op value, or refused with a 400 naming it.
gateway/api/responses/requests.py checks bodies against it and /openapi.json shows it.
"""

from __future__ import annotations

from gateway.http.errors import invalid, unsupported
from gateway.schema import field as s
from gateway.schema import readers as f
from gateway.schema.field import Check
from gateway.schema.openai_chat import MAX_TOP_LOGPROBS, SAMPLING, STREAM_OPTIONS
from gateway.schema.request import RequestSchema

LOGPROBS_INCLUDE = "message.output_text.logprobs"


def _refused(why: str) -> Check:
    def check(body: dict, name: str) -> None:
        if body.get(name) is not None:
            raise unsupported(name, why)

    return check


def _client_metadata(body: dict, name: str) -> None:
    value = f.obj(body, name) or {}
    if not all(isinstance(v, str) for v in value.values()):
        raise invalid(name, f"`{name}` values must be strings")


def _truncation(body: dict, name: str) -> None:
    if body.get(name) not in (None, "disabled"):
        raise unsupported(name, "only 'disabled'")


def _background(body: dict, name: str) -> None:
    if f.boolean(body, name):
        raise unsupported(name, "background responses")


_INPUT_ITEM = {"type": "object", "properties": {"type": {"type": "string"}}}
_FUNCTION_TOOL = {
    "type": "object",
    "required": ["type", "name"],
    "properties": {
        "type": {"const": "function"},
        "name": {"type": "string"},
        "description": {"type": "string"},
        "parameters": {"type": "object"},
        "strict": {"type": ["boolean", "null"]},
    },
}

_MCP_TOOL = {
    "type": "object",
    "required": ["type", "server_label"],
    "properties": {
        "type": {"const": "mcp"},
        "server_label": {"type": "string"},
        "server_url": {"type": "string"},
        "server_description": {"type": "string"},
        "allowed_tools": {"type": ["array", "object", "null"]},
        "require_approval": {"type": ["string", "object", "null"]},
    },
}

CREATE = RequestSchema(
    {
        "model": s.string("The served model's id or an alias.", minLength=1),
        "input": s.structure(
            {"anyOf": [{"type": "string"}, {"type": "array", "items": _INPUT_ITEM}]},
            "A string, or input items: messages, function calls and their outputs.",
        ),
        "instructions": s.string("A system message (not carried over by previous_response_id)."),
        "previous_response_id": s.string("Continue a stored response's conversation."),
        "store": s.boolean("Keep the response (in memory) for previous_response_id and GET."),
        "max_output_tokens": s.integer("Tokens to generate at most.", 1),
        "temperature": SAMPLING["temperature"],
        "top_p": SAMPLING["top_p"],
        "top_k": SAMPLING["top_k"],
        "min_p": SAMPLING["min_p"],
        "repetition_penalty": SAMPLING["repetition_penalty"],
        "stream": s.boolean("Server-sent events in the Responses API's event shapes."),
        "stream_options": STREAM_OPTIONS,
        "tools": s.structure(
            {"type": "array", "items": {"anyOf": [_FUNCTION_TOOL, _MCP_TOOL]}},
            "Function tools the model may call, and remote MCP servers' tools (servers the "
            "operator allowed with --mcp-config) that the server calls itself.",
        ),
        "tool_choice": s.structure(
            {
                "anyOf": [
                    {"enum": ["none", "auto", "required"]},
                    {
                        "type": "object",
                        "required": ["type", "name"],
                        "properties": {"type": {"const": "function"}, "name": {"type": "string"}},
                    },
                    {
                        "type": "object",
                        "required": ["type", "server_label"],
                        "properties": {
                            "type": {"const": "mcp"},
                            "server_label": {"type": "string"},
                            "name": {"type": ["string", "null"]},
                        },
                    },
                ]
            },
            "none, auto, required, one named function, or a tool of an `mcp` server.",
        ),
        "parallel_tool_calls": s.boolean("false: at most one call per turn."),
        "text": s.structure(
            {
                "type": "object",
                "properties": {"format": {"type": "object"}, "verbosity": {"type": "null"}},
            },
            "format: text, json_object or json_schema (enforced by constrained decoding).",
        ),
        "reasoning": s.structure(
            {
                "type": "object",
                "properties": {
                    "effort": {"type": "string"},
                    "summary": {"type": ["string", "null"]},
                    "generate_summary": {"type": ["string", "null"]},
                },
            },
            "effort none / minimal turns the template's thinking off, the others on; the "
            "template gets it as `reasoning_effort` (GPT-OSS).",
        ),
        "top_logprobs": s.integer("Alternatives per output token.", 0, MAX_TOP_LOGPROBS),
        "include": s.array(
            f"'{LOGPROBS_INCLUDE}' adds logprobs; other values are accepted.",
            {"type": "string"},
        ),
        "chat_template_kwargs": s.obj("Extension: passed to the chat template."),
        "metadata": s.accepted(s.obj(), "Echoed in the response."),
        "user": s.accepted(s.string()),
        "safety_identifier": s.accepted(s.string()),
        "prompt_cache_key": s.accepted(s.string(), "The prefix cache is automatic."),
        "prompt_cache_retention": s.accepted(s.string()),
        "prompt_cache_options": s.accepted(
            s.obj("", {"ttl": {"type": "string"}, "mode": {"type": "string"}})
        ),
        "service_tier": s.accepted(s.string()),
        "client_metadata": s.accepted(
            s.structure(
                {"type": "object", "additionalProperties": {"type": "string"}}, "", _client_metadata
            ),
            "Codex CLI's thread and turn ids.",
        ),
        "max_tool_calls": s.accepted(
            s.integer("", 0), "It caps OpenAI's built-in tools, of which none are served."
        ),
        "truncation": s.limited(s.string(enum=("disabled",)), _truncation, "Only 'disabled'."),
        "background": s.limited(s.boolean(), _background, "Only false."),
        "moderation": s.refused("", _refused("no moderation model is served")),
        "conversation": s.refused(
            "Use previous_response_id.",
            _refused("the Conversations API is not served; use previous_response_id"),
        ),
        "prompt": s.refused("", _refused("stored prompt templates are not served")),
        "context_management": s.refused("", _refused("context compaction is not done here")),
    },
    required=("model",),
)
