"""The response side of every operation in /openapi.json: what each route answers, by status.

`responses_for(operation_id)` is an OpenAPI 3.1 `responses` object; `COMPONENTS` holds the
schemas it references (`#/components/schemas/NAME`), for the document's `components.schemas`.
The shapes are the ones the code builds, not OpenAI's or Anthropic's documents: the routes
(gateway/routes/), the stream encoders (gateway/openai/chunks.py, gateway/anthropic/events.py,
gateway/responses/events.py, gateway/audio/speech/stream.py, gateway/audio/transcription/
stream.py) and the body builders they call. tests/unit/test_openapi_responses.py checks real
bodies of the app against them.

Policy:
- `required` lists the keys a body always has; a key present only sometimes is a property
  that is not required. Objects leave `additionalProperties` open: fields may be added.
- null is allowed exactly where the code can send null (type lists: `["string", "null"]`).
- Every status a route can answer is listed: the errors of gateway/http/errors.py in the shape
  of the route's API (OpenAI's `{"error": {...}}`; Anthropic's `{"type": "error", "error":
  {...}, "request_id"}` under /v1/messages), a 401 wherever gateway/http/auth.py asks for
  the API key (its open paths are read from there), a 500 everywhere (a bug; the body names
  the request id). Statuses the gateway never answers (422, 429) are not listed.
- A stream is `text/event-stream`. Its schema describes ONE event as the SSE parser reads it
  (`{"event": NAME, "data": TEXT}`; `event` is "message" when the stream names none), which is
  what OpenAPI before 3.2 means by a stream's schema and what schemathesis validates; `data`
  is JSON (`contentMediaType` + `contentSchema`: the event's own schema), or OpenAI's final
  `[DONE]`. Errors after a stream started travel in it as the API's error event.
"""

from __future__ import annotations

import copy
from typing import Any

from gateway.http import auth
from gateway.http.errors import is_anthropic_path

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    """A reference to `COMPONENTS[name]`."""
    if name not in COMPONENTS:
        raise KeyError(f"no component schema {name!r}")
    return {"$ref": f"#/components/schemas/{name}"}


def _ref(name: str) -> Schema:  # for use while COMPONENTS is being built
    return {"$ref": f"#/components/schemas/{name}"}


# -- schema builders -------------------------------------------------------------------------

STRING: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer"}
NUMBER: Schema = {"type": "number"}
BOOLEAN: Schema = {"type": "boolean"}
NULL: Schema = {"type": "null"}
COUNT: Schema = {"type": "integer", "minimum": 0}


def _obj(
    properties: dict[str, Schema], required: list[str] | tuple[str, ...] = (), doc: str = ""
) -> Schema:
    """An object with these properties; `required` lists the ones always present."""
    missing = [name for name in required if name not in properties]
    assert not missing, f"required but not described: {missing}"
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if doc:
        schema["description"] = doc
    return schema


def _all(properties: dict[str, Schema], doc: str = "") -> Schema:
    """An object whose every property is always present."""
    return _obj(properties, list(properties), doc)


def _array(items: Schema, doc: str = "") -> Schema:
    schema: Schema = {"type": "array", "items": items}
    if doc:
        schema["description"] = doc
    return schema


def _const(value: Any, doc: str = "") -> Schema:
    schema: Schema = {"const": value}
    if isinstance(value, str):
        schema["type"] = "string"
    elif isinstance(value, bool):
        schema["type"] = "boolean"
    if doc:
        schema["description"] = doc
    return schema


def _or_null(schema: Schema) -> Schema:
    """`schema`, or null."""
    kind = schema.get("type")
    if isinstance(kind, str) and "$ref" not in schema and "enum" not in schema:
        return {**schema, "type": [kind, "null"]}
    if "enum" in schema and isinstance(kind, str):
        return {**schema, "type": [kind, "null"], "enum": [*schema["enum"], None]}
    return {"anyOf": [schema, NULL]}


def _doc(schema: Schema, text: str) -> Schema:
    return {**schema, "description": text}


def _enum(*values: str, doc: str = "") -> Schema:
    schema: Schema = {"type": "string", "enum": list(values)}
    if doc:
        schema["description"] = doc
    return schema


def _event(kind: str, properties: dict[str, Schema], doc: str = "") -> Schema:
    """A streamed event object: `type` (the kind), plus fields that are always present."""
    return _all({"type": _const(kind), **properties}, doc)


# -- the schemas -----------------------------------------------------------------------------

ENGINE_STATES = ("starting", "ready", "swapping", "restarting", "failed", "stopped")
POOL_STATES = ("unloaded", "loading", "ready", "restarting", "failed")  # a models-file model
FINISH_REASONS = ("stop", "length", "tool_calls")
ANTHROPIC_ERROR_TYPES = (
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "request_too_large",
    "rate_limit_error",
    "overloaded_error",
    "timeout_error",
    "api_error",
)
ANTHROPIC_STOP_REASONS = ("end_turn", "max_tokens", "tool_use", "stop_sequence")
RESPONSE_STATUSES = ("completed", "incomplete", "in_progress", "failed")
ITEM_STATUSES = ("in_progress", "completed")

_ENGINE_STATE = _enum(
    *ENGINE_STATES,
    doc="The engine's state: `ready` serves; `starting`, `swapping` and `restarting` will; "
    "`failed` and `stopped` will not.",
)

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


_ANTHROPIC_USAGE_START = _obj(
    {
        "input_tokens": INTEGER,
        "output_tokens": INTEGER,
        "cache_creation_input_tokens": INTEGER,
        "cache_read_input_tokens": INTEGER,
    },
    ["input_tokens", "output_tokens"],
)

_RESPONSE_PART = {"anyOf": [_ref("ResponseOutputText"), _ref("ResponseReasoningText")]}
_WHERE = {"item_id": STRING, "output_index": COUNT, "content_index": COUNT}
_RESPONSE_EVENTS: dict[str, dict[str, Schema]] = {
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

_TRANSCRIPTION_TOKENS = _all(
    {
        "type": _const("tokens"),
        "input_tokens": _doc(INTEGER, "Seconds of audio, rounded up."),
        "input_token_details": _all({"audio_tokens": INTEGER, "text_tokens": INTEGER}),
        "output_tokens": INTEGER,
        "total_tokens": INTEGER,
    }
)

_OPENAI_ERROR = _all(
    {
        "message": _doc(STRING, "What is wrong; a 5xx names the request id."),
        "type": _doc(
            STRING,
            "`invalid_request_error` (4xx), `authentication_error` (401) or `server_error` (5xx).",
        ),
        "param": _doc(_or_null(STRING), "The request field at fault, as a JSON path, if one is."),
        "code": _doc(
            _or_null(STRING),
            "A machine-readable code: `unknown_parameter`, `unsupported_parameter`, "
            "`model_not_found`, `context_length_exceeded`, `request_too_large`, "
            "`invalid_api_key`, `queue_full`, `engine_unavailable`, ...",
        ),
    }
)

COMPONENTS: dict[str, Schema] = {
    # -- errors
    "ErrorResponse": _all({"error": _OPENAI_ERROR}, "An OpenAI-shaped error."),
    "AnthropicErrorResponse": _all(
        {
            "type": _const("error"),
            "error": _all(
                {
                    "type": _enum(*ANTHROPIC_ERROR_TYPES, doc="The kind, from the HTTP status."),
                    "message": STRING,
                }
            ),
            "request_id": _doc(STRING, "The request's id, as in the `x-request-id` header."),
        },
        "An Anthropic-shaped error (every error under /v1/messages).",
    ),
    # -- the server
    "ServerInfo": _obj(
        {
            "object": _const("server"),
            "name": STRING,
            "version": _doc(_or_null(STRING), "The installed package's version, if installed."),
            "status": _ENGINE_STATE,
            "api": _all({"openai": STRING, "anthropic": STRING, "health": STRING}),
            "models": _array(
                STRING,
                "The served model ids; only for a request that could use them (no --api-key, "
                "or the key presented).",
            ),
        },
        ["object", "name", "version", "status", "api"],
    ),
    "Health": _obj(
        {
            "status": _const("ok"),
            "model": _doc(STRING, "The served model's id."),
            "worker_pid": INTEGER,
            "restarts": _doc(COUNT, "Worker restarts since the last model load (when any)."),
        },
        ["status", "model", "worker_pid"],
        "The worker is ready.",
    ),
    "HealthUnavailable": _obj(
        {
            "status": _ENGINE_STATE,
            "reason": _or_null(STRING),
            "model": STRING,
            "loading": _doc(STRING, "The model a swap is bringing up."),
            "restarts": COUNT,
            "last_exit": _doc(_or_null(STRING), "Why the last worker ended (after restarts)."),
        },
        ["status", "reason", "model"],
        "No worker is ready: the state and why.",
    ),
    "PoolHealth": _obj(
        {
            "status": _enum("ok", "loading", "failed", "stopped"),
            "models": _doc(
                {"type": "object", "additionalProperties": _ref("PoolModelState")},
                "Every model of the models file, by id.",
            ),
        },
        ["status", "models"],
        "A server started with --models FILE: 200 while any model is ready or can be loaded.",
    ),
    "PoolModelState": _obj(
        {
            "state": _enum(*POOL_STATES),
            "kind": _enum("chat", "tts", "asr", "embed", "rerank", "auto"),
            "pinned": BOOLEAN,
            "in_flight": _doc(COUNT, "Requests using it now (it is not evicted meanwhile)."),
            "estimated_bytes": _doc(COUNT, "Its weights on disk plus its cache budgets."),
            "worker_pid": INTEGER,
            "resident_bytes": _doc(_or_null(COUNT), "Its worker's resident size (Linux)."),
            "reason": _doc(STRING, "Why it failed or is not ready."),
            "seconds": _doc(NUMBER, "models/load: how long the load took."),
            "ok": BOOLEAN,
            "id": STRING,
            "worker": _ref("WorkerStats"),
        },
        ["state", "kind", "pinned", "in_flight", "estimated_bytes"],
        "A models-file model's state (--models FILE).",
    ),
    # -- models
    "Model": _obj(
        {
            "id": STRING,
            "object": _const("model"),
            "created": _doc(INTEGER, "When it was loaded (Unix seconds)."),
            "owned_by": STRING,
            "root": _doc(STRING, "Its checkpoint path."),
            "state": _doc(
                _enum(*dict.fromkeys(ENGINE_STATES + POOL_STATES)),
                "The engine's state (`ready` serves); with --models FILE the model's own: "
                "unloaded, loading, ready, restarting, failed.",
            ),
            "kind": _doc(STRING, "--models FILE: the model's kind in the file."),
            "pinned": _doc(BOOLEAN, "--models FILE: never evicted."),
            "in_flight": _doc(COUNT, "--models FILE: requests using it now."),
            "estimated_bytes": _doc(COUNT, "--models FILE: weights on disk + cache budgets."),
            "worker_pid": _doc(INTEGER, "--models FILE: its worker, once loaded."),
            "resident_bytes": _doc(_or_null(COUNT), "--models FILE: its worker's RSS (Linux)."),
            "reason": _doc(STRING, "--models FILE: why it failed or is not ready."),
            "capabilities": _array(
                STRING,
                "What it does (`chat`, `complete`, `image_in`, `audio_in`, `speech`, "
                "`transcribe`, `translate`, `embed`, `rerank`, `score`); once a worker is ready.",
            ),
            "max_model_len": _doc(INTEGER, "Its context length in tokens, when known."),
            "aliases": _array(STRING, "OpenAI's names that reach it (`tts-1`, `whisper-1`, ...)."),
            "alias_patterns": _array(STRING, "`--model-alias` patterns that reach it."),
        },
        ["id", "object", "created", "owned_by", "root", "state"],
    ),
    "ModelList": _all({"object": _const("list"), "data": _array(_ref("Model"))}),
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
            for kind, fields in _RESPONSE_EVENTS.items()
        ]
    },
    # -- speech
    "SpeechStreamEvent": {
        "oneOf": [
            _event("speech.audio.delta", {"audio": _doc(STRING, "Base64 of encoded audio.")}),
            _event(
                "speech.audio.done",
                {
                    "usage": _all(
                        {"input_tokens": INTEGER, "output_tokens": INTEGER, "total_tokens": INTEGER}
                    )
                },
            ),
            _event("error", {"error": _OPENAI_ERROR}, "A failure after the stream started."),
        ]
    },
    "PresetVoice": _all(
        {"name": STRING, "language": _or_null(STRING), "type": _const("preset")},
        "One of the model's own voices.",
    ),
    "AudioVoice": _all(
        {
            "id": STRING,
            "object": _const("audio.voice"),
            "type": _const("audio_sample"),
            "name": STRING,
            "created_at": INTEGER,
            "transcript": _or_null(STRING),
            "bytes": _doc(COUNT, "The reference audio's size."),
        },
        "A saved voice: reference audio to clone, kept in the gateway's memory.",
    ),
    "VoiceList": _all(
        {
            "object": _const("list"),
            "model": _doc(STRING, "The speech model."),
            "voices": _array({"anyOf": [_ref("PresetVoice"), _ref("AudioVoice")]}),
            "aliases": _array(
                _obj(
                    {
                        "name": STRING,
                        "voice": _doc(
                            _or_null(STRING),
                            "The preset it stands for; null: the model's default voice.",
                        ),
                        "source": _doc(STRING, "`default` or `--voice-alias`."),
                        "error": _doc(STRING, "Why an override cannot be used."),
                    },
                    ["name", "voice", "source"],
                ),
                "OpenAI's voice names (and --voice-alias ones) and the preset each speaks with.",
            ),
            "cloning": BOOLEAN,
            "ref_text": BOOLEAN,
            "descriptions": BOOLEAN,
            "instructions": BOOLEAN,
            "languages": _array(STRING),
            "speed": BOOLEAN,
            "sample_rate": INTEGER,
            "response_formats": _array(STRING, "The formats this server can encode."),
        }
    ),
    "AudioVoiceDeleted": _all(
        {"id": STRING, "object": _const("audio.voice.deleted"), "deleted": _const(True)}
    ),
    # -- speech in
    "Transcription": _all({"text": STRING, "usage": _TRANSCRIPTION_TOKENS}),
    "TranscriptionSegment": _all(
        {
            "id": INTEGER,
            "seek": INTEGER,
            "start": NUMBER,
            "end": NUMBER,
            "text": STRING,
            "tokens": _array(INTEGER),
            "temperature": NUMBER,
            "avg_logprob": NUMBER,
            "compression_ratio": NUMBER,
            "no_speech_prob": NUMBER,
        }
    ),
    "TranscriptionVerbose": _obj(
        {
            "task": _enum("transcribe", "translate"),
            "language": _doc(STRING, "An English name (`english`)."),
            "duration": _doc(NUMBER, "Seconds."),
            "text": STRING,
            "segments": _array(_ref("TranscriptionSegment")),
            "words": _array(
                _all({"word": STRING, "start": NUMBER, "end": NUMBER}),
                "With `timestamp_granularities` `word`.",
            ),
            "usage": _all({"type": _const("duration"), "seconds": NUMBER}),
        },
        ["task", "language", "duration", "text", "segments", "usage"],
    ),
    "TranscriptionStreamEvent": {
        "anyOf": [
            _event("transcript.text.delta", {"delta": STRING}),
            _event("transcript.text.done", {"text": STRING, "usage": _TRANSCRIPTION_TOKENS}),
            _ref("ErrorResponse"),
        ]
    },
    # -- embeddings and scores
    "EmbeddingList": _all(
        {
            "object": _const("list"),
            "data": _array(
                _all(
                    {
                        "object": _const("embedding"),
                        "index": COUNT,
                        "embedding": {
                            "anyOf": [
                                _array(NUMBER, "`encoding_format` float."),
                                _doc(STRING, "`encoding_format` base64: little-endian float32."),
                            ]
                        },
                    }
                )
            ),
            "model": STRING,
            "usage": _all({"prompt_tokens": INTEGER, "total_tokens": INTEGER}),
        }
    ),
    "RerankResponse": _all(
        {
            "id": STRING,
            "model": STRING,
            "results": _array(
                _obj(
                    {
                        "index": _doc(COUNT, "The document's index in the request."),
                        "relevance_score": NUMBER,
                        "document": _doc(_all({"text": STRING}), "With `return_documents`."),
                    },
                    ["index", "relevance_score"],
                ),
                "Best first.",
            ),
            "usage": _all({"prompt_tokens": INTEGER, "total_tokens": INTEGER}),
            "scoring_method": _doc(STRING, "How the scores were made."),
        }
    ),
    "ScoreResponse": _all(
        {
            "id": STRING,
            "object": _const("list"),
            "created": INTEGER,
            "model": STRING,
            "data": _array(
                _all({"index": COUNT, "object": _const("score"), "score": NUMBER}),
                "One per pair, in pair order.",
            ),
            "usage": _all(
                {"prompt_tokens": INTEGER, "total_tokens": INTEGER, "completion_tokens": INTEGER}
            ),
            "scoring_method": STRING,
        }
    ),
    # -- tokenizer
    "TokenizeResponse": _all(
        {
            "count": COUNT,
            "max_model_len": _doc(_or_null(INTEGER), "The model's context length, if known."),
            "tokens": _array(INTEGER),
            "token_strs": _doc(_or_null(_array(STRING)), "With `return_token_strs`."),
        }
    ),
    "DetokenizeResponse": _all({"prompt": STRING}),
    # -- admin
    "ModelLoaded": _all(
        {
            "ok": _const(True),
            "id": _doc(STRING, "The served model's id now."),
            "path": STRING,
            "result": {
                "anyOf": [
                    _ref("PoolModelState"),
                    _all(
                        {
                            "model": STRING,
                            "model_path": STRING,
                            "previous_model": STRING,
                            "worker_pid": _or_null(INTEGER),
                            "aborted_requests": _doc(
                                COUNT, "Requests cut off past the drain timeout."
                            ),
                            "seconds": NUMBER,
                        }
                    ),
                ]
            },
        }
    ),
    "PoolStats": _obj(
        {"models": {"type": "object", "additionalProperties": _ref("PoolModelState")}},
        ["models"],
        "--models FILE: every model's state, and a loaded one's worker counters (`worker`).",
    ),
    "WorkerStats": _all(
        {
            "model": STRING,
            "pid": INTEGER,
            "active": COUNT,
            "waiting": COUNT,
            "active_request_ids": _array(STRING),
            "requests_total": COUNT,
            "requests_aborted": COUNT,
            "tokens_generated": COUNT,
            "prompt_tokens": COUNT,
            "prefix_cache_queries": COUNT,
            "prefix_cache_hits": COUNT,
            "speech_seconds": NUMBER,
            "transcribed_seconds": NUMBER,
        },
        "The worker's own counters, totals since it started.",
    ),
}


# -- media types -----------------------------------------------------------------------------

SSE = "text/event-stream"
JSON = "application/json"
DONE = "[DONE]"


def _json(name: str) -> dict[str, Any]:
    return {JSON: {"schema": ref(name)}}


def _text(doc: str) -> dict[str, Any]:
    return {"schema": _doc(STRING, doc)}


def _binary(doc: str) -> dict[str, Any]:
    return {"schema": {"type": "string", "format": "binary", "description": doc}}


def sse_event(content: Schema, events: tuple[str, ...] | None = None, done: bool = False) -> Schema:
    """The schema of one server-sent event as parsed (`{"event", "data"}`), whose `data` is
    JSON matching `content`, or `[DONE]` when `done`. `events`: the event names; None: the
    stream names none (the parser reads "message")."""
    payload: Schema = {"type": "string", "contentMediaType": JSON, "contentSchema": content}
    data = {"type": "string", "if": {"const": DONE}, "else": payload} if done else payload
    name = _enum(*events) if events is not None else _const("message")
    return _all({"event": name, "data": data})


def _sse(content: Schema, doc: str, events: tuple[str, ...] | None = None, done: bool = False):
    return {SSE: {"schema": _doc(sse_event(content, events, done), doc)}}


_OPENAI_STREAM_DOC = (
    "With `stream: true`: server-sent events, each `data:` a JSON chunk, then `data: [DONE]`. "
    'A failure after the stream started is one `data:` error object (`{"error": {...}}`) '
    "followed by `[DONE]`. Comment lines are keepalives."
)
_ANTHROPIC_EVENTS = (
    "message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop",
    "message_delta", "message_stop", "error",
)  # fmt: skip
_SPEECH_EVENTS = ("speech.audio.delta", "speech.audio.done", "error")
AUDIO_TYPES = {
    "audio/mpeg": "mp3",
    "audio/ogg": "opus (in Ogg)",
    "audio/aac": "aac (ADTS)",
    "audio/flac": "flac",
    "audio/wav": "wav",
    "audio/pcm": "pcm: raw 16-bit little-endian mono samples at the model's sample rate",
}


# -- headers ---------------------------------------------------------------------------------

_REQUEST_ID = {
    "description": "The request's id: the client's `x-request-id` when it is a short token, "
    "else one made here. On every response.",
    "required": True,
    "schema": STRING,
}
_RETRY_AFTER = {
    "description": "Whole seconds after which to retry, when the server knows.",
    "schema": {"type": "string", "pattern": "^[0-9]+$"},
}
_WWW_AUTHENTICATE = {"description": "`Bearer`.", "required": True, "schema": STRING}
_USAGE_HEADERS = {
    "x-usage-input-tokens": {
        "description": "Input tokens (a buffered file only; not on streams).",
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
    },
    "x-usage-output-tokens": {
        "description": "Output tokens (a buffered file only; not on streams).",
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
    },
}


# -- the operations --------------------------------------------------------------------------

_ERRORS = {
    400: "Invalid request: a malformed body, a field that is unknown, out of range or not "
    "supported here (an OpenAI error names it in `param`), or a model that does not do this.",
    401: "The server runs with `--api-key` and the request did not carry it (send "
    "`Authorization: Bearer KEY` or `x-api-key: KEY`).",
    404: "Not found.",
    413: "The request body exceeds the server's limit (`--max-body-mb`); nothing was parsed.",
    500: "Internal error (a bug, or the worker failed the request); the message names the "
    "request id.",
    409: "Conflict.",
    502: "Bad gateway.",
    503: "The server cannot take the request now: the admission queue is full (`queue_full`), "
    "no worker is ready (starting, restarting, swapping models: `engine_unavailable`), or the "
    "request was aborted by a model swap or shutdown (`aborted`, `model_swap`). `Retry-After` "
    "says when to retry, when known.",
}
_MODEL_404 = "The `model` named is not served here; the message lists the served models."
_SPEECH_404 = "This server has no speech model, or the `model` named is not served here."
_BODY_ERRORS = {400: "", 404: _MODEL_404, 413: "", 503: ""}


def _ok(description: str, content: dict[str, Any], headers: dict[str, Any] | None = None):
    response: dict[str, Any] = {"description": description, "content": content}
    if headers:
        response["headers"] = headers
    return response


# operation id -> (its routes, its 2xx response, error status -> what it means there: "" for
# the general meaning, "+ ..." for more). 401 (where the key applies) and 500 are added by
# `responses_for`.
_OPERATIONS: dict[str, tuple[tuple[tuple[str, str], ...], dict[str, Any], dict[int, str]]] = {
    "root": (
        (("GET", "/"), ("GET", "/v1")),
        _ok(
            "What this server is and where its APIs are; 200 whenever the gateway is up "
            "(`status` is the engine's state). A browser (an Accept header ranking text/html "
            "first) gets the web playground's page at `/` instead.",
            {**_json("ServerInfo"), "text/html": _text("The web playground (at `/` only).")},
        ),
        {},
    ),
    "health": (
        (("GET", "/health"),),
        _ok(
            "A worker is ready and serves (--models FILE: any model is ready or can load).",
            {JSON: {"schema": {"anyOf": [ref("Health"), ref("PoolHealth")]}}},
        ),
        {503: "No worker is ready (loading, restarting, swapping, failed): the body says why."},
    ),
    "metrics": (
        (("GET", "/metrics"),),
        _ok(
            "Prometheus metrics in the text exposition format (vLLM's names where they apply); "
            "200 also while no worker is ready.",
            {"text/plain": _text("Prometheus text format.")},
        ),
        {},
    ),
    "listModels": (
        (("GET", "/v1/models"),),
        _ok("Every served model, each with its capabilities.", _json("ModelList")),
        {},
    ),
    "getModel": (
        (("GET", "/v1/models/{model_id}"),),
        _ok("The served model this name reaches.", _json("Model")),
        {404: "No served model answers to this name; the message lists the served models."},
    ),
    "createChatCompletion": (
        (("POST", "/v1/chat/completions"),),
        _ok(
            "The completion; with `stream: true`, its chunks as server-sent events.",
            {
                **_json("ChatCompletion"),
                **_sse(
                    {"anyOf": [ref("ChatCompletionChunk"), ref("ErrorResponse")]},
                    _OPENAI_STREAM_DOC,
                    done=True,
                ),
            },
        ),
        _BODY_ERRORS,
    ),
    "createCompletion": (
        (("POST", "/v1/completions"),),
        _ok(
            "The completion; with `stream: true`, its chunks as server-sent events.",
            {
                **_json("TextCompletion"),
                **_sse(
                    {"anyOf": [ref("TextCompletionChunk"), ref("ErrorResponse")]},
                    _OPENAI_STREAM_DOC,
                    done=True,
                ),
            },
        ),
        _BODY_ERRORS,
    ),
    "createMessage": (
        (("POST", "/v1/messages"),),
        _ok(
            "The message; with `stream: true`, Anthropic's named events: message_start, ping, "
            "content blocks (start, deltas, stop), message_delta, message_stop.",
            {
                **_json("AnthropicMessage"),
                **_sse(
                    ref("AnthropicStreamEvent"),
                    "Named events (`event:` is the data's `type`); a failure after the start is "
                    "an `error` event. `ping` events are keepalives.",
                    _ANTHROPIC_EVENTS,
                ),
            },
        ),
        _BODY_ERRORS,
    ),
    "countMessageTokens": (
        (("POST", "/v1/messages/count_tokens"),),
        _ok(
            "The prompt's token count, as the worker would build it.", _json("AnthropicTokenCount")
        ),
        _BODY_ERRORS,
    ),
    "createResponse": (
        (("POST", "/v1/responses"),),
        _ok(
            "The response (stored unless `store: false`); with `stream: true`, the Responses "
            "API's events, each with its `sequence_number`.",
            {
                **_json("Response"),
                **_sse(
                    ref("ResponseStreamEvent"),
                    "Named events (`event:` is the data's `type`): response.created, "
                    "response.in_progress, the output items' events, then response.completed "
                    "(or response.incomplete); a failure after the start is an `error` event "
                    "and response.failed.",
                    tuple(_RESPONSE_EVENTS),
                ),
            },
        ),
        {
            **_BODY_ERRORS,
            400: "+ Also: a `previous_response_id` that is not stored.",
        },
    ),
    "getResponse": (
        (("GET", "/v1/responses/{response_id}"),),
        _ok("The stored response.", _json("Response")),
        {404: "No stored response has this id (they are kept in memory, the most recent only)."},
    ),
    "deleteResponse": (
        (("DELETE", "/v1/responses/{response_id}"),),
        _ok("The response was deleted.", _json("ResponseDeleted")),
        {404: "No stored response has this id."},
    ),
    "createSpeech": (
        (("POST", "/v1/audio/speech"),),
        _ok(
            "The speech, encoded in `response_format` (default mp3): the whole file, or, with "
            "`stream: true`, its bytes as they are encoded (a failure then cuts the transfer "
            'short); with `stream_format: "sse"`, server-sent events with base64 audio.',
            {
                **{kind: _binary(f"{name} audio.") for kind, name in AUDIO_TYPES.items()},
                **_sse(
                    ref("SpeechStreamEvent"),
                    '`stream_format: "sse"`: speech.audio.delta events, then '
                    "speech.audio.done with the usage; a failure after the start is an "
                    "`error` event.",
                    _SPEECH_EVENTS,
                ),
            },
            _USAGE_HEADERS,
        ),
        {**_BODY_ERRORS, 404: _SPEECH_404},
    ),
    "listVoices": (
        (("GET", "/v1/audio/voices"),),
        _ok(
            "The speech model's voices (presets and saved ones), OpenAI's voice names and "
            "what the model can do.",
            _json("VoiceList"),
        ),
        {404: "This server has no speech model.", 503: ""},
    ),
    "createVoice": (
        (("POST", "/v1/audio/voices"),),
        _ok("The saved voice.", _json("AudioVoice")),
        {
            400: "Not a multipart form, a field missing or invalid, audio that is not an "
            "audio file, or the store is full (`voice_limit_reached`).",
            413: "",
        },
    ),
    "deleteVoice": (
        (("DELETE", "/v1/audio/voices/{voice_id}"),),
        _ok("The voice was deleted.", _json("AudioVoiceDeleted")),
        {404: "No saved voice has this id."},
    ),
    "createTranscription": (
        (("POST", "/v1/audio/transcriptions"),),
        _ok(
            "The transcript in `response_format`: json (`{text, usage}`), verbose_json "
            "(segments, words when asked), text, srt or vtt; with `stream: true` (json or "
            "text), server-sent events.",
            {
                JSON: {"schema": {"anyOf": [ref("Transcription"), ref("TranscriptionVerbose")]}},
                "text/plain": _text("`response_format` text: the text and a newline."),
                "application/x-subrip": _text("`response_format` srt."),
                "text/vtt": _text("`response_format` vtt."),
                **_sse(
                    ref("TranscriptionStreamEvent"),
                    "transcript.text.delta events, then transcript.text.done with the usage; "
                    "a failure after the start is a `data:` error object and `[DONE]`.",
                    done=True,
                ),
            },
        ),
        _BODY_ERRORS,
    ),
    "createTranslation": (
        (("POST", "/v1/audio/translations"),),
        _ok(
            "The English translation in `response_format`: json, verbose_json, text, srt or vtt.",
            {
                JSON: {"schema": {"anyOf": [ref("Transcription"), ref("TranscriptionVerbose")]}},
                "text/plain": _text("`response_format` text: the text and a newline."),
                "application/x-subrip": _text("`response_format` srt."),
                "text/vtt": _text("`response_format` vtt."),
            },
        ),
        {**_BODY_ERRORS, 400: "+ Also: a model that cannot translate."},
    ),
    "createEmbedding": (
        (("POST", "/v1/embeddings"),),
        _ok("One embedding per input, in input order.", _json("EmbeddingList")),
        _BODY_ERRORS,
    ),
    "rerank": (
        (("POST", "/v1/rerank"), ("POST", "/v2/rerank"), ("POST", "/rerank")),
        _ok("The documents' relevance to the query, best first.", _json("RerankResponse")),
        _BODY_ERRORS,
    ),
    "score": (
        (("POST", "/v1/score"), ("POST", "/score")),
        _ok("A relevance score per pair.", _json("ScoreResponse")),
        _BODY_ERRORS,
    ),
    "tokenize": (
        (("POST", "/tokenize"),),
        _ok(
            "The token ids a completion of the prompt (or a chat of the messages) is served "
            "with; `count` is its `usage.prompt_tokens`.",
            _json("TokenizeResponse"),
        ),
        {
            **_BODY_ERRORS,
            400: "+ Also: messages the chat template rejects, or a model that does not chat.",
        },
    ),
    "detokenize": (
        (("POST", "/detokenize"),),
        _ok("The text of the token ids.", _json("DetokenizeResponse")),
        {**_BODY_ERRORS, 400: "+ Also: an id outside the vocabulary."},
    ),
    "loadModel": (
        (("POST", "/v1/admin/models/load"),),
        _ok(
            "The new model serves (requests still running past the drain timeout were aborted).",
            _json("ModelLoaded"),
        ),
        {
            400: "`model` missing, an unknown field, or no such local directory or hub repo "
            "(`model_not_found`).",
            413: "",
            502: "The download failed (`download_failed`) or the model did not load "
            "(`model_load_failed`; the previous model serves again when it could be restored).",
            503: "The engine is stopped or not started.",
        },
    ),
    "adminStats": (
        (("GET", "/v1/admin/stats"),),
        _ok(
            "The worker's counters (--models FILE: every model's).",
            {JSON: {"schema": {"anyOf": [ref("WorkerStats"), ref("PoolStats")]}}},
        ),
        {503: "No worker is ready to answer."},
    ),
    "unloadModel": (
        (("POST", "/v1/admin/models/unload"),),
        _ok("The model's worker stopped (--models FILE).", _json("PoolModelState")),
        {
            400: "`model` missing or an unknown field, or the server has no models file.",
            404: _MODEL_404,
            409: "Requests are using the model (`model_busy`); retry when they end.",
            413: "",
        },
    ),
    "pinModel": (
        (("POST", "/v1/admin/models/pin"),),
        _ok("The model is pinned or unpinned (--models FILE).", _json("PoolModelState")),
        {
            400: "`model` missing or an unknown field, or the server has no models file.",
            404: _MODEL_404,
            413: "",
        },
    ),
}

OPERATION_IDS: tuple[str, ...] = tuple(_OPERATIONS)


def operation_routes(operation_id: str) -> tuple[tuple[str, str], ...]:
    """The (method, path) pairs an operation is served at, paths in OpenAPI's template form."""
    return _OPERATIONS[operation_id][0]


def is_open(path: str) -> bool:
    """Whether `path` is served without the API key (gateway/http/auth.py)."""
    return path in auth.OPEN_PATHS or path.startswith(auth.OPEN_PREFIXES)


def _error(status: int, anthropic: bool, detail: str) -> dict[str, Any]:
    """An error response: `detail` says what the status means for this operation ("": the
    general meaning; "+ ..." adds to it)."""
    text = _ERRORS[status]
    if detail.startswith("+ "):
        text = f"{text} {detail[2:]}"
    elif detail:
        text = detail
    name = "AnthropicErrorResponse" if anthropic else "ErrorResponse"
    response: dict[str, Any] = {
        "description": text,
        "headers": {"x-request-id": _REQUEST_ID},
        "content": _json(name),
    }
    if status == 401:
        response["headers"]["WWW-Authenticate"] = _WWW_AUTHENTICATE
    if status == 503:
        response["headers"]["Retry-After"] = _RETRY_AFTER
    return response


def responses_for(operation_id: str) -> dict[str, Any]:
    """The OpenAPI `responses` object of an operation: its 2xx and every error status it can
    answer, keyed by status as a string. A fresh copy: the caller may change it."""
    try:
        routes, ok, errors = _OPERATIONS[operation_id]
    except KeyError:
        raise KeyError(f"unknown operation id {operation_id!r}") from None
    paths = [path for _, path in routes]
    anthropic = all(is_anthropic_path(path) for path in paths)
    ok = copy.deepcopy(ok)
    ok["headers"] = {"x-request-id": _REQUEST_ID, **ok.get("headers", {})}
    out: dict[str, Any] = {"200": ok}
    statuses = dict(errors)
    if not all(is_open(path) for path in paths):
        statuses.setdefault(401, "")
    statuses.setdefault(500, "")
    for status in sorted(statuses):
        if operation_id == "health" and status == 503:
            health = {"anyOf": [ref("HealthUnavailable"), ref("PoolHealth")]}
            out["503"] = {
                "description": statuses[503],
                "headers": {"x-request-id": _REQUEST_ID},
                "content": {JSON: {"schema": health}},
            }
            continue
        out[str(status)] = _error(status, anthropic, statuses[status])
    return copy.deepcopy(out)
