"""A request's `model`, checked: the served model it reaches, or a 404 / 400 that names it.

Which names reach which model is gateway/workers/served_models.py. Here: an unknown name is a
404 that lists the served ids (and OpenAI's names for them); a served model asked for what it
does not do (the chat model for a transcription, the TTS model for a chat) is a 400 naming the
model that does, or the flag that would add one; a known OpenAI name this server cannot honour
(`gpt-4o-transcribe-diarize`) is a 400 saying why.
"""

from __future__ import annotations

from starlette.requests import HTTPConnection

from gateway.http.errors import APIError
from gateway.workers.served_models import (
    CHAT,
    EMBEDDING,
    IMAGE,
    RERANK,
    SPEECH,
    TRANSCRIPTION,
    VIDEO,
    ServedModel,
    UnsupportedName,
    lookup,
    served_models,
    serving,
)

WHAT = {
    CHAT: "generate text",
    SPEECH: "make speech",
    TRANSCRIPTION: "transcribe audio",
    EMBEDDING: "make embeddings",
    RERANK: "rerank or score",
    IMAGE: "make images",
    VIDEO: "make video",
}
ADD_ONE = {
    CHAT: "this server serves no chat model",
    SPEECH: "serve one with `--speech-model TTS`",
    TRANSCRIPTION: "serve a speech-recognition model, or add one with --transcription-model",
    EMBEDDING: "serve an embedding model, or add one with `--embedding-model EMBEDDER`",
    RERANK: "serve a reranker or an embedding model, or add one with `--rerank-model "
    "RERANKER` or `--embedding-model EMBEDDER`",
    IMAGE: "serve an image-generation model, or add one with `--image-model IMAGE_MODEL`",
    VIDEO: "serve a video-generation model, or add one with `--video-model VIDEO_MODEL`",
}


def models_of(request: HTTPConnection) -> list[ServedModel]:
    pool = request.app.state.pool
    if pool is not None:
        return pool.served_models()
    config = request.app.state.config
    return served_models(request.app.state.engine, config.model_aliases)


def resolve_model(request: HTTPConnection, name: str, kind: str | None) -> ServedModel:
    """The served model `name` reaches, which must serve `kind` (None: any kind)."""
    models = models_of(request)
    try:
        model = lookup(models, name, kind)
    except UnsupportedName as exc:
        raise APIError(
            400,
            f"The model `{name}` is not supported: {exc}; {_served(models)}",
            param="model",
            code="model_not_supported",
        ) from None
    if model is None:
        raise unknown_model(name, models)
    if kind is not None and model.kinds and kind not in model.kinds:
        other = serving(models, kind)
        hint = f"the model that does is {other.describe()}" if other else ADD_ONE[kind]
        named = f"`{name}`" if name == model.id else f"`{name}` (`{model.id}`)"
        raise APIError(
            400,
            f"The model {named} does not {WHAT[kind]} (it does: "
            f"{', '.join(model.capabilities) or 'none reported'}); {hint}",
            param="model",
            code="model_not_supported",
        )
    return model


def unknown_model(name: str, models: list[ServedModel]) -> APIError:
    return APIError(
        404,
        f"The model `{name}` does not exist or is not served here; {_served(models)}",
        param="model",
        code="model_not_found",
    )


def _served(models: list[ServedModel]) -> str:
    return "served models: " + ", ".join(m.describe() for m in models)
