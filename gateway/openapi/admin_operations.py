"""The admin routes' responses in /openapi.json (gateway/api/admin/): swap, models-file
load / unload / pin, the worker's counters, LoRA adapters; in the shape of responses.py's
operations (routes, 2xx, error statuses)."""

from __future__ import annotations

from typing import Any

from gateway.openapi.response_parts import JSON, MODEL_404, json_body, ok, text_body
from gateway.openapi.schemas import ref

ADMIN_OPERATIONS: dict[str, tuple[tuple[tuple[str, str], ...], dict[str, Any], dict[int, str]]] = {
    "loadModel": (
        (("POST", "/v1/admin/models/load"),),
        ok(
            "The new model serves (requests still running past the drain timeout were aborted).",
            json_body("ModelLoaded"),
        ),
        {
            400: "`model` missing, an unknown field, or not a checkpoint this server can load "
            "(`model_not_found`: no such hub repo, or not a directory with a config.json and "
            "weights, or outside `--model-root`; the same words for each, checked before the "
            "serving model is drained).",
            401: "The server has an admin key (`--admin-key`) and the request did not carry "
            "it (the API key does not open this route).",
            403: "",
            413: "",
            502: "The download failed (`download_failed`) or the model did not load "
            "(`model_load_failed`; the previous model serves again when it could be restored).",
            503: "The engine is stopped or not started.",
        },
    ),
    "adminStats": (
        (("GET", "/v1/admin/stats"),),
        ok(
            "The worker's counters (--models FILE: every model's).",
            {JSON: {"schema": {"anyOf": [ref("WorkerStats"), ref("PoolStats")]}}},
        ),
        {
            401: "The server runs with `--api-key` or `--admin-key` and the request carried "
            "neither.",
            503: "No worker is ready to answer.",
        },
    ),
    "unloadModel": (
        (("POST", "/v1/admin/models/unload"),),
        ok("The model's worker stopped (--models FILE).", json_body("PoolModelState")),
        {
            400: "`model` missing or an unknown field, or the server has no models file.",
            401: "The server has an admin key (`--admin-key`) and the request did not carry it.",
            403: "",
            404: MODEL_404,
            409: "Requests are using the model (`model_busy`); retry when they end.",
            413: "",
        },
    ),
    "pinModel": (
        (("POST", "/v1/admin/models/pin"),),
        ok("The model is pinned or unpinned (--models FILE).", json_body("PoolModelState")),
        {
            400: "`model` missing or an unknown field, or the server has no models file.",
            401: "The server has an admin key (`--admin-key`) and the request did not carry it.",
            403: "",
            404: MODEL_404,
            413: "",
        },
    ),
    "loadLoraAdapter": (
        (("POST", "/v1/load_lora_adapter"),),
        ok(
            "The adapter serves: requests name it as `model` (vLLM's plain-text answer).",
            {"text/plain": text_body("Success: LoRA adapter 'NAME' added successfully.")},
        ),
        {
            400: "A field missing or unknown; a name taken, or loaded already without "
            "`load_inplace`; not an adapter directory (or outside `--model-root`); an adapter "
            "the worker refuses (another base model, DoRA, `--max-loras` reached); a models "
            "file; a model that takes no adapters.",
            401: "The server has an admin key (`--admin-key`) and the request did not carry it.",
            403: "",
            413: "",
            503: "",
        },
    ),
    "unloadLoraAdapter": (
        (("POST", "/v1/unload_lora_adapter"),),
        ok(
            "The adapter's name is gone; requests running under it end as they would.",
            {"text/plain": text_body("Success: LoRA adapter 'NAME' removed successfully.")},
        ),
        {
            400: "`lora_name` missing or an unknown field; a models file.",
            401: "The server has an admin key (`--admin-key`) and the request did not carry it.",
            403: "",
            404: "No adapter of that name is loaded.",
            413: "",
            503: "",
        },
    ),
}
