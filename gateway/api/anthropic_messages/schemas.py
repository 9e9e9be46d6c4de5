"""The Anthropic Messages API's response schemas (for /openapi.json): bodies and stream events."""

from __future__ import annotations

from gateway.schema.builders import (
    COUNT,
    INTEGER,
    NULL,
    STRING,
    Schema,
    _all,
    _array,
    _const,
    _doc,
    _enum,
    _event,
    _obj,
    _or_null,
    _ref,
)

ANTHROPIC_STOP_REASONS = ("end_turn", "max_tokens", "tool_use", "stop_sequence")

_ANTHROPIC_USAGE_START = _obj(
    {
        "input_tokens": INTEGER,
        "output_tokens": INTEGER,
        "cache_creation_input_tokens": INTEGER,
        "cache_read_input_tokens": INTEGER,
    },
    ["input_tokens", "output_tokens"],
)

SCHEMAS: dict[str, Schema] = {
    # -- Anthropic messages
    "AnthropicUsage": _all(
        {
            "input_tokens": _doc(INTEGER, "Prompt tokens not read from the prefix cache."),
            "output_tokens": INTEGER,
            "cache_creation_input_tokens": INTEGER,
            "cache_read_input_tokens": _doc(INTEGER, "Prompt tokens read from the prefix cache."),
        }
    ),
    "AnthropicContentBlock": {
        "oneOf": [
            _event("text", {"text": STRING}),
            _event("thinking", {"thinking": STRING, "signature": STRING}),
            _event(
                "tool_use",
                {"id": STRING, "name": STRING, "input": {"type": "object"}},
            ),
        ]
    },
    "AnthropicMessage": _obj(
        {
            "id": STRING,
            "type": _const("message"),
            "role": _const("assistant"),
            "model": STRING,
            "content": _array(_ref("AnthropicContentBlock")),
            "stop_reason": _enum(*ANTHROPIC_STOP_REASONS),
            "stop_sequence": _doc(_or_null(STRING), "The stop sequence that ended it, if one did."),
            "usage": _ref("AnthropicUsage"),
            "context_management": _doc(
                _all({"applied_edits": _array({"type": "object"})}),
                "The context-management edits applied (when the request asked for them).",
            ),
        },
        ["id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"],
    ),
    "AnthropicStreamEvent": {
        "oneOf": [
            _event(
                "message_start",
                {
                    "message": _all(
                        {
                            "id": STRING,
                            "type": _const("message"),
                            "role": _const("assistant"),
                            "model": STRING,
                            "content": {"type": "array", "maxItems": 0},
                            "stop_reason": NULL,
                            "stop_sequence": NULL,
                            "usage": _ANTHROPIC_USAGE_START,
                        }
                    )
                },
            ),
            _event("ping", {}),
            _event(
                "content_block_start",
                {"index": COUNT, "content_block": _ref("AnthropicContentBlock")},
            ),
            _event(
                "content_block_delta",
                {
                    "index": COUNT,
                    "delta": {
                        "oneOf": [
                            _event("text_delta", {"text": STRING}),
                            _event("thinking_delta", {"thinking": STRING}),
                            _event("signature_delta", {"signature": STRING}),
                            _event("input_json_delta", {"partial_json": STRING}),
                        ]
                    },
                },
            ),
            _event("content_block_stop", {"index": COUNT}),
            _obj(
                {
                    "type": _const("message_delta"),
                    "delta": _all(
                        {
                            "stop_reason": _enum(*ANTHROPIC_STOP_REASONS),
                            "stop_sequence": _or_null(STRING),
                        }
                    ),
                    "usage": _ref("AnthropicUsage"),
                    "context_management": _all({"applied_edits": _array({"type": "object"})}),
                },
                ["type", "delta", "usage"],
            ),
            _event("message_stop", {}),
            _ref("AnthropicErrorResponse"),
        ]
    },
    "AnthropicTokenCount": _obj(
        {
            "input_tokens": INTEGER,
            "context_management": _doc(
                _all({"original_input_tokens": INTEGER}),
                "With `context_management`: the count before the edits.",
            ),
        },
        ["input_tokens"],
    ),
}
