"""The tokenizer routes and the admin API."""

from __future__ import annotations

from gateway.openapi.schema_builders import (
    COUNT,
    INTEGER,
    NUMBER,
    STRING,
    Schema,
    _all,
    _array,
    _const,
    _doc,
    _obj,
    _or_null,
    _ref,
)

SCHEMAS: dict[str, Schema] = {
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
            "prefill_tokens_in_decode_steps": COUNT,
            "speech_seconds": NUMBER,
            "transcribed_seconds": NUMBER,
        },
        "The worker's own counters, totals since it started.",
    ),
}
