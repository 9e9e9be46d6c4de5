"""The response schemas of `/v1/chat/completions` and `/v1/completions`: bodies and stream
chunks (for /openapi.json)."""

from __future__ import annotations

from gateway.schema.builders import (
    COUNT,
    INTEGER,
    NULL,
    NUMBER,
    STRING,
    Schema,
    _all,
    _array,
    _const,
    _doc,
    _enum,
    _obj,
    _or_null,
    _ref,
)

FINISH_REASONS = ("stop", "length", "tool_calls")

_TOKEN_LOGPROB_TOP = _all(
    {
        "token": STRING,
        "logprob": NUMBER,
        "bytes": _array(
            {"type": "integer", "minimum": 0, "maximum": 255}, "The token's UTF-8 bytes."
        ),
    }
)

_CHAT_DELTA_TOOL_CALL = _obj(
    {
        "index": COUNT,
        "id": STRING,
        "type": _const("function"),
        "function": _obj({"name": STRING, "arguments": STRING}, ["arguments"]),
    },
    ["index", "function"],
    "A piece of a tool call: its first piece has `id`, `type` and `function.name`, later ones "
    "only argument text.",
)


def _chunk(obj: str, choice: Schema, doc: str) -> Schema:
    return _obj(
        {
            "id": STRING,
            "object": _const(obj),
            "created": INTEGER,
            "model": STRING,
            "choices": _array(choice, "Empty in the final usage chunk."),
            "usage": _or_null(
                _doc(
                    _ref("CompletionUsage"),
                    "With `stream_options.include_usage`: null on every chunk but the last, "
                    "which has the totals (and no choices). Absent otherwise.",
                )
            ),
        },
        ["id", "object", "created", "model", "choices"],
        doc,
    )


SCHEMAS: dict[str, Schema] = {
    # -- OpenAI chat and completions
    "CompletionUsage": _all(
        {
            "prompt_tokens": INTEGER,
            "completion_tokens": INTEGER,
            "total_tokens": INTEGER,
            "prompt_tokens_details": _all({"cached_tokens": INTEGER}),
            "completion_tokens_details": _all({"reasoning_tokens": INTEGER}),
        }
    ),
    "ChatTokenLogprob": _all(
        {**_TOKEN_LOGPROB_TOP["properties"], "top_logprobs": _array(_TOKEN_LOGPROB_TOP)}
    ),
    "ChatLogprobs": _all(
        {"content": _array(_ref("ChatTokenLogprob")), "refusal": NULL},
    ),
    "ChatCompletionToolCall": _all(
        {
            "id": STRING,
            "type": _const("function"),
            "function": _all({"name": STRING, "arguments": _doc(STRING, "JSON text.")}),
        }
    ),
    "ChatCompletionMessage": _obj(
        {
            "role": _const("assistant"),
            "content": _doc(
                _or_null(STRING), "null beside tool calls and no text, and with audio out."
            ),
            "refusal": NULL,
            "reasoning_content": _doc(STRING, "The model's reasoning, when it reasoned."),
            "tool_calls": _array(_ref("ChatCompletionToolCall")),
            "audio": _doc(
                _obj(
                    {"id": STRING, "data": STRING, "transcript": STRING, "expires_at": INTEGER},
                    ["id", "data", "transcript", "expires_at"],
                ),
                "modalities ['text', 'audio']: the spoken answer (data: base64 in `format`).",
            ),
        },
        ["role", "content", "refusal"],
    ),
    "ChatCompletion": _all(
        {
            "id": STRING,
            "object": _const("chat.completion"),
            "created": INTEGER,
            "model": STRING,
            "choices": _array(
                _all(
                    {
                        "index": COUNT,
                        "message": _ref("ChatCompletionMessage"),
                        "logprobs": _or_null(_ref("ChatLogprobs")),
                        "finish_reason": _enum(*FINISH_REASONS),
                    }
                )
            ),
            "usage": _ref("CompletionUsage"),
        }
    ),
    "ChatCompletionChunk": _chunk(
        "chat.completion.chunk",
        _all(
            {
                "index": COUNT,
                "delta": _obj(
                    {
                        "role": _const("assistant"),
                        "content": _doc(_or_null(STRING), "null with audio out."),
                        "reasoning_content": STRING,
                        "tool_calls": _array(_CHAT_DELTA_TOOL_CALL),
                        "audio": _doc(
                            _obj(
                                {
                                    "id": STRING,
                                    "expires_at": INTEGER,
                                    "transcript": STRING,
                                    "data": _doc(STRING, "base64 16-bit PCM."),
                                }
                            ),
                            "modalities ['text', 'audio']: a piece of the transcript or audio.",
                        ),
                    }
                ),
                "logprobs": _or_null(_ref("ChatLogprobs")),
                "finish_reason": _or_null(_enum(*FINISH_REASONS)),
            }
        ),
        "One streamed chat event: a role chunk per choice, output chunks, a finish chunk per "
        "choice, then the usage chunk (when asked).",
    ),
    "CompletionLogprobs": _all(
        {
            "tokens": _array(STRING),
            "token_logprobs": _array(NUMBER),
            "top_logprobs": _array({"type": "object", "additionalProperties": NUMBER}),
            "text_offset": _array(COUNT),
        }
    ),
    "TextCompletion": _all(
        {
            "id": STRING,
            "object": _const("text_completion"),
            "created": INTEGER,
            "model": STRING,
            "choices": _array(
                _all(
                    {
                        "index": COUNT,
                        "text": STRING,
                        "logprobs": _or_null(_ref("CompletionLogprobs")),
                        "finish_reason": _enum(*FINISH_REASONS),
                    }
                )
            ),
            "usage": _ref("CompletionUsage"),
        }
    ),
    "TextCompletionChunk": _chunk(
        "text_completion",
        _all(
            {
                "index": COUNT,
                "text": STRING,
                "logprobs": _or_null(_ref("CompletionLogprobs")),
                "finish_reason": _or_null(_enum(*FINISH_REASONS)),
            }
        ),
        "One streamed completion event.",
    ),
}
