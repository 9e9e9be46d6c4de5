"""Errors, the server's own routes (health, version, metrics) and the model list."""

from __future__ import annotations

from gateway.openapi.schema_builders import (
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
    _obj,
    _or_null,
    _ref,
)

ENGINE_STATES = ("starting", "ready", "swapping", "restarting", "failed", "stopped")

POOL_STATES = ("unloaded", "loading", "ready", "restarting", "failed")  # a models-file model

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

_ENGINE_STATE = _enum(
    *ENGINE_STATES,
    doc="The engine's state: `ready` serves; `starting`, `swapping` and `restarting` will; "
    "`failed` and `stopped` will not.",
)

OPENAI_ERROR = _all(
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

SCHEMAS: dict[str, Schema] = {
    # -- errors
    "ErrorResponse": _all({"error": OPENAI_ERROR}, "An OpenAI-shaped error."),
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
}
