"""The schemas of what the routes answer (`COMPONENTS`, for /openapi.json's
`components.schemas`) and the small builders they are written with.

The shapes are the ones the code builds, not OpenAI's or Anthropic's documents: the routes
(gateway/routes/), the stream encoders (gateway/openai/chunks.py, gateway/anthropic/events.py,
gateway/responses/events.py, gateway/audio/speech/stream.py, gateway/audio/transcription/
stream.py) and the body builders they call. Policy: `required` lists the keys a body always
has; objects leave `additionalProperties` open (fields may be added); null is allowed exactly
where the code can send null. Which operation answers which of them, by status:
responses.py.
"""

from __future__ import annotations

from typing import Any

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
