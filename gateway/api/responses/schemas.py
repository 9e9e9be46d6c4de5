"""The Responses API's response schemas (for /openapi.json): bodies and stream events."""

from __future__ import annotations

from gateway.schema.builders import (
    BOOLEAN,
    COUNT,
    INTEGER,
    NUMBER,
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

RESPONSE_STATUSES = ("completed", "incomplete", "in_progress", "failed")

ITEM_STATUSES = ("in_progress", "completed")

_RESPONSE_PART = {"anyOf": [_ref("ResponseOutputText"), _ref("ResponseReasoningText")]}

_WHERE = {"item_id": STRING, "output_index": COUNT, "content_index": COUNT}

RESPONSE_EVENTS: dict[str, dict[str, Schema]] = {
    **{
        f"response.{kind}": {"response": _ref("Response")}
        for kind in ("created", "in_progress", "completed", "incomplete", "failed")
    },
    "response.output_item.added": {"output_index": COUNT, "item": _ref("ResponseOutputItem")},
    "response.output_item.done": {"output_index": COUNT, "item": _ref("ResponseOutputItem")},
    "response.content_part.added": {**_WHERE, "part": _RESPONSE_PART},
    "response.content_part.done": {**_WHERE, "part": _RESPONSE_PART},
    "response.output_text.delta": {
        **_WHERE,
        "delta": STRING,
        "logprobs": _array(_ref("ChatTokenLogprob")),
    },
    "response.output_text.done": {
        **_WHERE,
        "text": STRING,
        "logprobs": _array(_ref("ChatTokenLogprob")),
    },
    "response.reasoning_text.delta": {**_WHERE, "delta": STRING},
    "response.reasoning_text.done": {**_WHERE, "text": STRING},
    "response.function_call_arguments.delta": {
        "item_id": STRING,
        "output_index": COUNT,
        "delta": STRING,
    },
    "response.function_call_arguments.done": {
        "item_id": STRING,
        "output_index": COUNT,
        "name": STRING,
        "arguments": STRING,
    },
    "error": {"code": _or_null(STRING), "message": STRING, "param": _or_null(STRING)},
}

SCHEMAS: dict[str, Schema] = {
    # -- OpenAI Responses
    "ResponseUsage": _all(
        {
            "input_tokens": INTEGER,
            "input_tokens_details": _all({"cached_tokens": INTEGER, "cache_write_tokens": INTEGER}),
            "output_tokens": INTEGER,
            "output_tokens_details": _all({"reasoning_tokens": INTEGER}),
            "total_tokens": INTEGER,
        }
    ),
    "ResponseOutputText": _all(
        {
            "type": _const("output_text"),
            "text": STRING,
            "annotations": _array({}),
            "logprobs": _array(_ref("ChatTokenLogprob"), "Empty unless logprobs were asked for."),
        }
    ),
    "ResponseReasoningText": _event("reasoning_text", {"text": STRING}),
    "ResponseOutputItem": {
        "oneOf": [
            _event(
                "reasoning",
                {
                    "id": STRING,
                    "summary": _array({}, "Always empty: no summaries are made."),
                    "content": _array(_ref("ResponseReasoningText")),
                    "status": _enum(*ITEM_STATUSES),
                },
            ),
            _event(
                "message",
                {
                    "id": STRING,
                    "role": _const("assistant"),
                    "status": _enum(*ITEM_STATUSES),
                    "content": _array(_ref("ResponseOutputText")),
                },
            ),
            _event(
                "function_call",
                {
                    "id": STRING,
                    "call_id": _doc(STRING, "The id a `function_call_output` answers."),
                    "name": STRING,
                    "arguments": _doc(STRING, "JSON text."),
                    "status": _enum(*ITEM_STATUSES),
                },
            ),
        ]
    },
    "Response": _obj(
        {
            "id": STRING,
            "object": _const("response"),
            "created_at": INTEGER,
            "completed_at": _or_null(INTEGER),
            "status": _enum(*RESPONSE_STATUSES),
            "error": _or_null(_all({"code": STRING, "message": STRING})),
            "incomplete_details": _or_null(_all({"reason": STRING})),
            "model": STRING,
            "output": _array(_ref("ResponseOutputItem")),
            "usage": _doc(_ref("ResponseUsage"), "Absent until the response is over."),
            # What the request set, echoed.
            "instructions": _or_null(STRING),
            "max_output_tokens": _or_null(INTEGER),
            "metadata": {"type": "object"},
            "parallel_tool_calls": BOOLEAN,
            "previous_response_id": _or_null(STRING),
            "temperature": _or_null(NUMBER),
            "top_p": _or_null(NUMBER),
            "tool_choice": {
                "anyOf": [
                    STRING,
                    _all({"type": _const("function"), "name": STRING}),
                ]
            },
            "tools": _array(
                _obj(
                    {
                        "type": _const("function"),
                        "name": STRING,
                        "description": _or_null(STRING),
                        "parameters": _or_null({"type": "object"}),
                        "strict": _or_null(BOOLEAN),
                    },
                    ["type", "name", "description", "parameters", "strict"],
                )
            ),
            "text": _all({"format": {"type": "object"}}),
            "reasoning": {"type": "object"},
            "store": BOOLEAN,
            "top_logprobs": _or_null(INTEGER),
            "truncation": STRING,
            "user": STRING,
        },
        [
            "id",
            "object",
            "created_at",
            "completed_at",
            "status",
            "error",
            "incomplete_details",
            "model",
            "output",
            "instructions",
            "max_output_tokens",
            "metadata",
            "parallel_tool_calls",
            "previous_response_id",
            "temperature",
            "top_p",
            "tool_choice",
            "tools",
            "text",
            "reasoning",
            "store",
            "top_logprobs",
            "truncation",
        ],
    ),  # fmt: skip
    "ResponseDeleted": _all(
        {"id": STRING, "object": _const("response.deleted"), "deleted": _const(True)}
    ),
    "ResponseStreamEvent": {
        "oneOf": [
            _event(kind, {"sequence_number": COUNT, **fields})
            for kind, fields in RESPONSE_EVENTS.items()
        ]
    },
}
