"""The response schemas of the server's own routes (the base URL, health, metrics), the model list
and the admin routes (for /openapi.json)."""

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
    _obj,
    _or_null,
    _ref,
)

ENGINE_STATES = ("starting", "ready", "swapping", "restarting", "failed", "stopped")

POOL_STATES = ("unloaded", "loading", "ready", "restarting", "failed")  # a models-file model

_ENGINE_STATE = _enum(
    *ENGINE_STATES,
    doc="The engine's state: `ready` serves; `starting`, `swapping` and `restarting` will; "
    "`failed` and `stopped` will not.",
)

SCHEMAS: dict[str, Schema] = {
    # -- the server
    "ServerInfo": _obj(
        {
            "object": _const("server"),
            "name": STRING,
            "version": _doc(
                _or_null(STRING),
                "The installed package's version, if installed; only for a request that could "
                "use the API (no --api-key, or the key presented).",
            ),
            "status": _ENGINE_STATE,
            "api": _all({"openai": STRING, "anthropic": STRING, "health": STRING}),
            "models": _array(
                STRING,
                "The served model ids; only for a request that could use them (no --api-key, "
                "or the key presented).",
            ),
        },
        ["object", "name", "status", "api"],
    ),
    "Health": _obj(
        {
            "status": _const("ok"),
            "model": _doc(STRING, "The served model's id."),
            "worker_pid": INTEGER,
            "restarts": _doc(COUNT, "Worker restarts since the last model load (when any)."),
        },
        ["status"],
        "The worker is ready. Without the API key (when the server has one) only `status`.",
    ),
    "HealthUnavailable": _obj(
        {
            "status": _enum(
                *ENGINE_STATES,
                "unresponsive",
                doc="The engine's state (`unresponsive`: a ready worker whose heartbeats are "
                "late; it is restarted when the heartbeat timeout passes).",
            ),
            "reason": _or_null(STRING),
            "model": STRING,
            "worker_pid": INTEGER,
            "loading": _doc(STRING, "The model a swap is bringing up."),
            "restarts": COUNT,
            "last_exit": _doc(_or_null(STRING), "Why the last worker ended (after restarts)."),
        },
        ["status"],
        "No worker is ready: the state and why (without the API key, when the server has "
        "one, only `status`).",
    ),
    "PoolHealth": _obj(
        {
            "status": _enum("ok", "loading", "failed", "stopped"),
            "models": _doc(
                {"type": "object", "additionalProperties": _ref("PoolModelState")},
                "Every model of the models file, by id.",
            ),
        },
        ["status"],
        "A server started with --models FILE: 200 while any model is ready or can be loaded "
        "(without the API key, when the server has one, only `status`).",
    ),
    "PoolModelState": _obj(
        {
            "state": _enum(*POOL_STATES),
            "kind": _enum("chat", "speech", "transcription", "embed", "rerank", "auto"),
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
            "root": _doc(STRING, "Its checkpoint path (a LoRA adapter: its directory)."),
            "parent": _doc(
                _or_null(STRING), "vLLM's: a LoRA adapter's base model id; null for a model."
            ),
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
            "task": _doc(
                _or_null(
                    _enum(
                        "chat", "speech", "transcription", "embedding", "rerank", "image", "video"
                    )
                ),
                "What the model is for, so a UI can keep speech, transcription, embedding and "
                "image models out of its chat list; once a worker is ready.",
            ),
            "capabilities": _array(
                STRING,
                "What it does (`chat`, `complete`, `image_in`, `audio_in`, `video_in`, `speech`, "
                "`transcribe`, `translate`, `embed`, `rerank`, `score`, `image_out`, "
                "`image_edit`); once a worker is ready.",
            ),
            "max_model_len": _doc(INTEGER, "Its context length in tokens, when known."),
            "aliases": _array(STRING, "OpenAI's names that reach it (`tts-1`, `whisper-1`, ...)."),
            "alias_patterns": _array(STRING, "`--model-alias` patterns that reach it."),
        },
        ["id", "object", "created", "owned_by", "root", "state"],
    ),
    "ModelList": _all({"object": _const("list"), "data": _array(_ref("Model"))}),
}

# The admin routes' answers (listed after the other APIs' in /openapi.json).
ADMIN: dict[str, Schema] = {
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
            "prefill_tokens_in_decode_steps": COUNT,
            "speech_seconds": NUMBER,
            "transcribed_seconds": NUMBER,
        },
        "The worker's own counters, totals since it started.",
    ),
}
