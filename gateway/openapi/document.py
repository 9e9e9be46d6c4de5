"""`GET /openapi.json`: the OpenAPI 3.1 document of this server, built from the tables the
parsers check bodies against (gateway/schema/) and the response side (responses.py).

One source of truth: a request body's schema is its parser's `RequestSchema.json_schema()`,
so a field is documented exactly when it is accepted, with the type, range and policy the
gateway enforces. The document is built once per app from its config (the API key decides
the security section) and cached.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from gateway.api.admin import adapters
from gateway.api.admin.admin import LOAD, MODEL_ONLY, PIN
from gateway.api.anthropic_messages import surface as anthropic
from gateway.api.chat_completions.surface import COMPLETION
from gateway.api.embeddings.request import EMBEDDING
from gateway.api.embeddings.scoring import RERANK, SCORE
from gateway.api.images.request import EDIT as IMAGE_EDIT
from gateway.api.images.request import EDIT_JSON as IMAGE_EDIT_JSON
from gateway.api.images.request import GENERATION as IMAGE_GENERATION
from gateway.api.responses import surface as responses
from gateway.api.speech.form import REF_AUDIO_FILES, VOICE
from gateway.api.tokenize import requests as tokenize
from gateway.api.transcriptions.request import TRANSCRIPTION, TRANSLATION
from gateway.api.videos.request import CREATE as VIDEO_CREATE
from gateway.audio.speech.request import SPEECH
from gateway.generation.chat_body import CHAT
from gateway.openapi.responses import (
    COMPONENTS,
    OPERATION_IDS,
    is_open,
    operation_routes,
    responses_for,
)
from gateway.schema.request import RequestSchema

JSON, FORM = "application/json", "multipart/form-data"
_FILE = {"type": "string", "contentMediaType": "application/octet-stream"}

# operation id -> (summary, tag, {content type: request schema name}); GETs and DELETEs have
# no body.
_OPERATIONS: dict[str, tuple[str, str, dict[str, str]]] = {
    "root": ("The server and its APIs", "server", {}),
    "health": ("Whether a worker is ready", "server", {}),
    "metrics": ("Prometheus metrics", "server", {}),
    "listModels": ("The served models", "models", {}),
    "getModel": ("One served model", "models", {}),
    "createChatCompletion": ("OpenAI chat completions", "chat", {JSON: "ChatCompletionRequest"}),
    "createCompletion": ("OpenAI text completions", "chat", {JSON: "CompletionRequest"}),
    "createMessage": ("Anthropic Messages", "anthropic", {JSON: "MessageRequest"}),
    "countMessageTokens": (
        "Anthropic token counting",
        "anthropic",
        {JSON: "CountTokensRequest"},
    ),
    "createResponse": ("OpenAI Responses", "responses", {JSON: "ResponseRequest"}),
    "getResponse": ("A stored response", "responses", {}),
    "deleteResponse": ("Delete a stored response", "responses", {}),
    "createSpeech": ("Speech from text", "audio", {JSON: "SpeechRequest", FORM: "SpeechForm"}),
    "listVoices": ("The TTS model's voices", "audio", {}),
    "createVoice": ("Save a voice to clone", "audio", {FORM: "VoiceForm"}),
    "deleteVoice": ("Delete a saved voice", "audio", {}),
    "createTranscription": ("Text from speech", "audio", {FORM: "TranscriptionForm"}),
    "createTranslation": ("English text from speech", "audio", {FORM: "TranslationForm"}),
    "createEmbedding": ("Embeddings", "embeddings", {JSON: "EmbeddingRequest"}),
    "rerank": ("Rerank documents against a query", "embeddings", {JSON: "RerankRequest"}),
    "score": ("Score text pairs", "embeddings", {JSON: "ScoreRequest"}),
    "createImage": ("Pictures from a prompt", "images", {JSON: "ImageGenerationRequest"}),
    "createImageEdit": (
        "A picture edited by a prompt",
        "images",
        {FORM: "ImageEditForm", JSON: "ImageEditRequest"},
    ),
    "createVideo": (
        "A video job: a clip with sound from a prompt",
        "videos",
        {FORM: "VideoForm", JSON: "VideoRequest"},
    ),
    "listVideos": ("The video jobs (query: limit, order, after)", "videos", {}),
    "getVideo": ("A video job", "videos", {}),
    "deleteVideo": ("Forget a video job (aborting it if it runs)", "videos", {}),
    "getVideoContent": ("A video's MP4, or its first frame (query: variant)", "videos", {}),
    "tokenize": ("Token ids of a prompt or a chat (vLLM)", "tokenizer", {JSON: "TokenizeRequest"}),
    "detokenize": ("Text of token ids (vLLM)", "tokenizer", {JSON: "DetokenizeRequest"}),
    "loadModel": ("Swap the served model", "admin", {JSON: "LoadModelRequest"}),
    "adminStats": ("The worker's counters", "admin", {}),
    "unloadModel": ("Unload a models-file model", "admin", {JSON: "ModelOnlyRequest"}),
    "pinModel": ("Pin or unpin a models-file model", "admin", {JSON: "PinModelRequest"}),
    "loadLoraAdapter": ("Serve a LoRA adapter (vLLM)", "admin", {JSON: "LoadLoraAdapterRequest"}),
    "unloadLoraAdapter": (
        "Stop serving a LoRA adapter (vLLM)",
        "admin",
        {JSON: "UnloadLoraAdapterRequest"},
    ),  # fmt: skip
}

_PATH_PARAMETERS = {
    "model_id": "A served model's id or alias.",
    "response_id": "A stored response's id.",
    "voice_id": "A saved voice's id.",
    "video_id": "A video job's id.",
}


def _form(table: RequestSchema, files: tuple[str, ...]) -> dict[str, Any]:
    """A multipart form's schema: the table's, its file fields as binary parts."""
    schema = table.json_schema()
    for name in files:
        described = schema["properties"].get(name, {})
        schema["properties"][name] = {**_FILE, "description": described.get("description", "")}
    return schema


def _speech_form() -> dict[str, Any]:
    schema = SPEECH.json_schema()
    for name in REF_AUDIO_FILES:
        schema["properties"][name] = {**_FILE, "description": "The clip to clone, as a file."}
    return schema


def request_schemas() -> dict[str, dict[str, Any]]:
    """Every request body's schema by component name (from the parsers' tables)."""
    return {
        "ChatCompletionRequest": CHAT.json_schema(),
        "CompletionRequest": COMPLETION.json_schema(),
        "MessageRequest": anthropic.CREATE.json_schema(),
        "CountTokensRequest": anthropic.COUNT.json_schema(),
        "ResponseRequest": responses.CREATE.json_schema(),
        "SpeechRequest": SPEECH.json_schema(),
        "SpeechForm": _speech_form(),
        "VoiceForm": _form(VOICE, ("audio_sample",)),
        "TranscriptionForm": _form(TRANSCRIPTION, ("file",)),
        "TranslationForm": _form(TRANSLATION, ("file",)),
        "EmbeddingRequest": EMBEDDING.json_schema(),
        "RerankRequest": RERANK.json_schema(),
        "ScoreRequest": SCORE.json_schema(),
        "ImageGenerationRequest": IMAGE_GENERATION.json_schema(),
        "ImageEditForm": _form(IMAGE_EDIT, ("image", "mask")),
        "ImageEditRequest": IMAGE_EDIT_JSON.json_schema(),
        "VideoRequest": VIDEO_CREATE.json_schema(),
        "VideoForm": _form(VIDEO_CREATE, ("input_reference",)),
        "TokenizeRequest": {
            "anyOf": [
                {**tokenize.PROMPT.json_schema(), "required": ["prompt"]},
                tokenize.CHAT.json_schema(),
            ],
            "description": "A prompt, or a chat (told apart by `prompt` / `messages`).",
        },
        "DetokenizeRequest": tokenize.DETOKENIZE.json_schema(),
        "LoadModelRequest": LOAD.json_schema(),
        "ModelOnlyRequest": MODEL_ONLY.json_schema(),
        "PinModelRequest": PIN.json_schema(),
        "LoadLoraAdapterRequest": adapters.LOAD.json_schema(),
        "UnloadLoraAdapterRequest": adapters.UNLOAD.json_schema(),
    }


def _operation_id(operation_id: str, index: int, path: str) -> str:
    """The first path keeps the id; further paths of one operation get theirs (`rootV1`)."""
    if index == 0:
        return operation_id
    return operation_id + "".join(part.capitalize() for part in path.strip("/").split("/"))


def _parameters(path: str) -> list[dict[str, Any]]:
    return [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"},
         "description": text}
        for name, text in _PATH_PARAMETERS.items()
        if "{" + name + "}" in path
    ]  # fmt: skip


def build_document(api_key_required: bool) -> dict[str, Any]:
    missing = set(OPERATION_IDS) ^ set(_OPERATIONS)
    if missing:
        raise AssertionError(f"operations without both sides: {sorted(missing)}")
    bodies = request_schemas()
    paths: dict[str, dict[str, Any]] = {}
    for operation_id, (summary, tag, content) in _OPERATIONS.items():
        for index, (method, path) in enumerate(operation_routes(operation_id)):
            operation: dict[str, Any] = {
                "operationId": _operation_id(operation_id, index, path),
                "summary": summary,
                "tags": [tag],
                "responses": responses_for(operation_id),
            }
            parameters = _parameters(path)
            if parameters:
                operation["parameters"] = parameters
            if content:
                operation["requestBody"] = {
                    "required": True,
                    "content": {
                        kind: {"schema": {"$ref": f"#/components/schemas/{name}"}}
                        for kind, name in content.items()
                    },
                }
            if api_key_required and is_open(path):
                operation["security"] = []
            paths.setdefault(path, {})[method.lower()] = operation
    overlap = set(bodies) & set(COMPONENTS)
    if overlap:
        raise AssertionError(f"request and response schemas share names: {sorted(overlap)}")
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "vllm-omni-mlx",
            "version": _version(),
            "description": "OpenAI- and Anthropic-compatible model server for MLX. Request "
            "schemas are the tables the gateway checks bodies against: a field not listed is "
            "a 400 naming it.",
        },
        "paths": paths,
        "components": {"schemas": {**COMPONENTS, **bodies}},
    }
    if api_key_required:
        document["components"]["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer"},
            "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
        }
        document["security"] = [{"bearer": []}, {"apiKey": []}]
    return document


@cache
def cached_document(api_key_required: bool) -> dict[str, Any]:
    return build_document(api_key_required)


def _version() -> str:
    try:
        return version("vllm-omni-mlx")
    except PackageNotFoundError:
        return "0"
