"""The response side of every operation in /openapi.json: what each route answers, by status.

`responses_for(operation_id)` is an OpenAPI 3.1 `responses` object; the schemas it references
(`#/components/schemas/NAME`) are `COMPONENTS` (gateway/openapi/schemas.py).
The shapes are the ones the code builds, not OpenAI's or Anthropic's documents: the routes
(gateway/api/*/), the stream encoders
(gateway/api/chat_completions/chunks.py, gateway/api/anthropic_messages/events.py,
gateway/api/responses/events.py, gateway/api/speech/stream.py, gateway/api/transcriptions/
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
from gateway.openapi.admin_operations import ADMIN_OPERATIONS
from gateway.openapi.response_parts import (
    JSON,
    MODEL_404,
    binary_body,
    json_body,
    ok,
    sse_body,
    sse_event,
    text_body,
)
from gateway.openapi.schemas import COMPONENTS, RESPONSE_EVENTS, ref
from gateway.openapi.video_operations import VIDEO_OPERATIONS
from gateway.schema.builders import STRING

__all__ = ["COMPONENTS", "OPERATION_IDS", "is_open", "operation_routes", "ref", "responses_for",
           "sse_event"]  # fmt: skip


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
    403: "The route is closed: the server has an API key and no admin key (`--admin-key`).",
    404: "Not found.",
    413: "The request body exceeds the server's limit (`--max-body-mb`); nothing was parsed.",
    500: "Internal error (a bug, or the worker failed the request); the message names the "
    "request id.",
    409: "Conflict.",
    501: "The server lacks an optional part this needs (`missing_dependency`; the message "
    "names the extra its operator installs).",
    502: "Bad gateway.",
    503: "The server cannot take the request now: the admission queue is full (`queue_full`), "
    "no worker is ready (starting, restarting, swapping models: `engine_unavailable`), or the "
    "request was aborted by a model swap or shutdown (`aborted`, `model_swap`). `Retry-After` "
    "says when to retry, when known.",
}
_SPEECH_404 = "This server has no speech model, or the `model` named is not served here."
_IMAGE_404 = "The `model` named is not served here."
_IMAGE_EVENTS = {
    kind: (f"{kind}.partial_image", f"{kind}.completed", "error")
    for kind in ("image_generation", "image_edit")
}
_BODY_ERRORS = {400: "", 404: MODEL_404, 413: "", 503: ""}


# operation id -> (its routes, its 2xx response, error status -> what it means there: "" for
# the general meaning, "+ ..." for more). 401 (where the key applies) and 500 are added by
# `responses_for`.
_OPERATIONS: dict[str, tuple[tuple[tuple[str, str], ...], dict[str, Any], dict[int, str]]] = {
    "root": (
        (("GET", "/"), ("GET", "/v1")),
        ok(
            "What this server is and where its APIs are; 200 whenever the gateway is up "
            "(`status` is the engine's state). A browser (an Accept header ranking text/html "
            "first) gets the web playground's page at `/` instead.",
            {
                **json_body("ServerInfo"),
                "text/html": text_body("The web playground (at `/` only)."),
            },
        ),
        {},
    ),
    "health": (
        (("GET", "/health"),),
        ok(
            "A worker is ready and serves (--models FILE: any model is ready or can load).",
            {JSON: {"schema": {"anyOf": [ref("Health"), ref("PoolHealth")]}}},
        ),
        {503: "No worker is ready (loading, restarting, swapping, failed): the body says why."},
    ),
    "metrics": (
        (("GET", "/metrics"),),
        ok(
            "Prometheus metrics in the text exposition format (vLLM's names where they apply); "
            "200 also while no worker is ready.",
            {"text/plain": text_body("Prometheus text format.")},
        ),
        {},
    ),
    "listModels": (
        (("GET", "/v1/models"),),
        ok("Every served model, each with its capabilities.", json_body("ModelList")),
        {},
    ),
    "getModel": (
        (("GET", "/v1/models/{model_id}"),),
        ok("The served model this name reaches.", json_body("Model")),
        {404: "No served model answers to this name; the message lists the served models."},
    ),
    "createChatCompletion": (
        (("POST", "/v1/chat/completions"),),
        ok(
            "The completion; with `stream: true`, its chunks as server-sent events.",
            {
                **json_body("ChatCompletion"),
                **sse_body(
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
        ok(
            "The completion; with `stream: true`, its chunks as server-sent events.",
            {
                **json_body("TextCompletion"),
                **sse_body(
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
        ok(
            "The message; with `stream: true`, Anthropic's named events: message_start, ping, "
            "content blocks (start, deltas, stop), message_delta, message_stop.",
            {
                **json_body("AnthropicMessage"),
                **sse_body(
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
        ok(
            "The prompt's token count, as the worker would build it.",
            json_body("AnthropicTokenCount"),
        ),
        _BODY_ERRORS,
    ),
    "createResponse": (
        (("POST", "/v1/responses"),),
        ok(
            "The response (stored unless `store: false`); with `stream: true`, the Responses "
            "API's events, each with its `sequence_number`.",
            {
                **json_body("Response"),
                **sse_body(
                    ref("ResponseStreamEvent"),
                    "Named events (`event:` is the data's `type`): response.created, "
                    "response.in_progress, the output items' events, then response.completed "
                    "(or response.incomplete); a failure after the start is an `error` event "
                    "and response.failed.",
                    tuple(RESPONSE_EVENTS),
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
        ok("The stored response.", json_body("Response")),
        {404: "No stored response has this id (they are kept in memory, the most recent only)."},
    ),
    "deleteResponse": (
        (("DELETE", "/v1/responses/{response_id}"),),
        ok("The response was deleted.", json_body("ResponseDeleted")),
        {404: "No stored response has this id."},
    ),
    "createSpeech": (
        (("POST", "/v1/audio/speech"),),
        ok(
            "The speech, encoded in `response_format` (default mp3): the whole file, or, with "
            "`stream: true`, its bytes as they are encoded (a failure then cuts the transfer "
            'short); with `stream_format: "sse"`, server-sent events with base64 audio.',
            {
                **{kind: binary_body(f"{name} audio.") for kind, name in AUDIO_TYPES.items()},
                **sse_body(
                    ref("SpeechStreamEvent"),
                    '`stream_format: "sse"`: speech.audio.delta events, then '
                    "speech.audio.done with the usage; a failure after the start is an "
                    "`error` event.",
                    _SPEECH_EVENTS,
                ),
            },
            _USAGE_HEADERS,
        ),
        {**_BODY_ERRORS, 404: _SPEECH_404, 501: ""},
    ),
    "listVoices": (
        (("GET", "/v1/audio/voices"),),
        ok(
            "The speech model's voices (presets and saved ones), OpenAI's voice names and "
            "what the model can do.",
            json_body("VoiceList"),
        ),
        {404: "This server has no speech model.", 503: ""},
    ),
    "createVoice": (
        (("POST", "/v1/audio/voices"),),
        ok("The saved voice.", json_body("AudioVoice")),
        {
            400: "Not a multipart form, a field missing or invalid, audio that is not an "
            "audio file, or the store is full (`voice_limit_reached`).",
            413: "",
            501: "",
        },
    ),
    "deleteVoice": (
        (("DELETE", "/v1/audio/voices/{voice_id}"),),
        ok("The voice was deleted.", json_body("AudioVoiceDeleted")),
        {404: "No saved voice has this id."},
    ),
    "createTranscription": (
        (("POST", "/v1/audio/transcriptions"),),
        ok(
            "The transcript in `response_format`: json (`{text, usage}`), verbose_json "
            "(segments, words when asked), text, srt or vtt; with `stream: true` (json or "
            "text), server-sent events.",
            {
                JSON: {"schema": {"anyOf": [ref("Transcription"), ref("TranscriptionVerbose")]}},
                "text/plain": text_body("`response_format` text: the text and a newline."),
                "application/x-subrip": text_body("`response_format` srt."),
                "text/vtt": text_body("`response_format` vtt."),
                **sse_body(
                    ref("TranscriptionStreamEvent"),
                    "transcript.text.delta events, then transcript.text.done with the usage; "
                    "a failure after the start is a `data:` error object and `[DONE]`.",
                    done=True,
                ),
            },
        ),
        {**_BODY_ERRORS, 501: ""},
    ),
    "createTranslation": (
        (("POST", "/v1/audio/translations"),),
        ok(
            "The English translation in `response_format`: json, verbose_json, text, srt or vtt.",
            {
                JSON: {"schema": {"anyOf": [ref("Transcription"), ref("TranscriptionVerbose")]}},
                "text/plain": text_body("`response_format` text: the text and a newline."),
                "application/x-subrip": text_body("`response_format` srt."),
                "text/vtt": text_body("`response_format` vtt."),
            },
        ),
        {**_BODY_ERRORS, 400: "+ Also: a model that cannot translate.", 501: ""},
    ),
    "createEmbedding": (
        (("POST", "/v1/embeddings"),),
        ok("One embedding per input, in input order.", json_body("EmbeddingList")),
        _BODY_ERRORS,
    ),
    "rerank": (
        (("POST", "/v1/rerank"), ("POST", "/v2/rerank"), ("POST", "/rerank")),
        ok("The documents' relevance to the query, best first.", json_body("RerankResponse")),
        _BODY_ERRORS,
    ),
    "score": (
        (("POST", "/v1/score"), ("POST", "/score")),
        ok("A relevance score per pair.", json_body("ScoreResponse")),
        _BODY_ERRORS,
    ),
    "createImage": (
        (("POST", "/v1/images/generations"),),
        ok(
            "The pictures, once all are made; with `stream: true`, server-sent events.",
            {
                **json_body("ImagesResponse"),
                **sse_body(
                    ref("ImageGenerationStreamEvent"),
                    "`stream: true`: image_generation.partial_image for each preview, then "
                    "image_generation.completed for each picture; a failure after the start "
                    "is an `error` event.",
                    _IMAGE_EVENTS["image_generation"],
                ),
            },
        ),
        {**_BODY_ERRORS, 404: _IMAGE_404},
    ),
    "createImageEdit": (
        (("POST", "/v1/images/edits"),),
        ok(
            "The edited pictures, once all are made; with `stream: true`, server-sent events.",
            {
                **json_body("ImagesResponse"),
                **sse_body(
                    ref("ImageEditStreamEvent"),
                    "`stream: true`: image_edit.partial_image for each preview, then "
                    "image_edit.completed for each picture; a failure after the start is an "
                    "`error` event.",
                    _IMAGE_EVENTS["image_edit"],
                ),
            },
        ),
        {**_BODY_ERRORS, 400: "+ Also: a picture that cannot be read.", 404: _IMAGE_404},
    ),
    "tokenize": (
        (("POST", "/tokenize"),),
        ok(
            "The token ids a completion of the prompt (or a chat of the messages) is served "
            "with; `count` is its `usage.prompt_tokens`.",
            json_body("TokenizeResponse"),
        ),
        {
            **_BODY_ERRORS,
            400: "+ Also: messages the chat template rejects, or a model that does not chat.",
        },
    ),
    "detokenize": (
        (("POST", "/detokenize"),),
        ok("The text of the token ids.", json_body("DetokenizeResponse")),
        {**_BODY_ERRORS, 400: "+ Also: an id outside the vocabulary."},
    ),
    **VIDEO_OPERATIONS,
    **ADMIN_OPERATIONS,
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
        "content": json_body(name),
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
