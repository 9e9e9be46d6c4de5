"""vLLM's `POST /v1/load_lora_adapter` and `POST /v1/unload_lora_adapter`, behind the admin
key (gateway/http/auth.py): LoRA adapters served beside the chat model, each then a model of
its own name (listed on /v1/models with `parent`), run per request inside the worker's batch
(worker/text/adapters/). Answers as vLLM's: plain text on success, its error words otherwise.
"""

from __future__ import annotations

import os

from starlette.requests import Request
from starlette.responses import PlainTextResponse

from gateway.api.admin.admin import under_root
from gateway.http.errors import APIError, invalid
from gateway.http.json_request import read_json
from gateway.http.model_names import models_of
from gateway.http.model_routing import engine_of
from gateway.schema import field as s
from gateway.schema.request import RequestSchema
from gateway.workers.errors import WorkerRejected
from gateway.workers.lora_adapters import adapter_problem, not_an_adapter
from gateway.workers.protocol import EngineClient

LOAD = RequestSchema(
    {
        "lora_name": s.string("The adapter's name: the `model` requests use.", minLength=1),
        "lora_path": s.string(
            "An mlx-lm LoRA adapter directory (adapter_config.json, adapters.safetensors) on "
            "the server.",
            minLength=1,
        ),
        "load_inplace": s.boolean("Replace an adapter already loaded under this name."),
    },
    required=("lora_name", "lora_path"),
)
UNLOAD = RequestSchema(
    {
        "lora_name": s.string("The adapter's name.", minLength=1),
        "lora_int_id": s.accepted(s.integer("vLLM's internal adapter id: no meaning here.")),
    },
    required=("lora_name",),
)


async def load_lora_adapter(request: Request) -> PlainTextResponse:
    body = await read_json(request)
    LOAD.check(body)
    name, path = body["lora_name"], body["lora_path"]
    engine = _adapting_engine(request)
    root = request.app.state.config.model_root
    problem = adapter_problem(name, path)
    if problem is None and root is not None and not under_root(path, root):
        problem = "lora_path", not_an_adapter(path)  # the same words: paths stay unprobed
    if problem is not None:
        raise invalid(*problem)
    loaded = name in _adapters(engine)
    if loaded and not body.get("load_inplace"):
        raise invalid("lora_name", f"The lora adapter '{name}' has already been loaded.")
    if not loaded and any(m.answers_to(name) or name in m.aliases for m in models_of(request)):
        raise invalid("lora_name", f"`{name}` already names a served model")
    try:  # in place: in one step, the old adapter serving on if the new one cannot
        replace = bool(body.get("load_inplace"))  # the worker's list decides what it replaces
        await engine.change_adapter(name, os.path.realpath(path), replace=replace)
    except WorkerRejected as exc:
        raise invalid(
            "lora_path", f"The LoRA adapter '{name}' could not be loaded: {exc}"
        ) from None
    return PlainTextResponse(f"Success: LoRA adapter '{name}' added successfully.")


async def unload_lora_adapter(request: Request) -> PlainTextResponse:
    body = await read_json(request)
    UNLOAD.check(body)
    name = body["lora_name"]
    engine = _adapting_engine(request)
    try:  # the worker's list is the one that counts
        await engine.change_adapter(name, None)
    except WorkerRejected as exc:
        if "is loaded" not in str(exc):  # e.g. a model that takes none
            raise invalid("lora_name", f"The LoRA adapter '{name}': {exc}") from None
        raise APIError(
            404,
            f"The lora adapter '{name}' cannot be found.",
            param="lora_name",
            code="model_not_found",
        ) from None
    return PlainTextResponse(f"Success: LoRA adapter '{name}' removed successfully.")


def _adapting_engine(request: Request) -> EngineClient:
    """The one worker's engine, when its model takes adapters; else a 400 saying why."""
    if request.app.state.pool is not None:
        raise invalid(
            None,
            "a server with --models FILE loads no LoRA adapters at run time: give a model of "
            "the file an `adapter:`",
        )
    engine = engine_of(request)
    ready = engine.ready_info
    if ready is not None and (ready.text is None or ready.text.adapters is None):
        raise invalid(None, f"the served model `{engine.model_name}` takes no LoRA adapters")
    return engine


def _adapters(engine: EngineClient) -> set[str]:
    ready = engine.ready_info
    text = ready.text if ready is not None else None
    return {a.name for a in (text.adapters or [])} if text is not None else set()
