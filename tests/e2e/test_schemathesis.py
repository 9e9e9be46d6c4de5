"""Schemathesis against the real server, from the vendored official OpenAI document.

Requests are generated from the document's schemas for every served operation (chat,
completions, Responses, speech, transcriptions, translations, embeddings, images, videos,
models). Hooks make them ones this server can be asked: the served model's id in `model` (the
one serving that operation, most of the time), a voice the TTS model has, a real WAV file and a
PNG as the uploads, output lengths and picture sizes capped so the tiny models answer in
milliseconds, the ids of video jobs made for the run in the video paths (a job a generated request
starts is deleted at once). Two checks run on every answer: no
5xx, and a 2xx body conforms to the document's response schema. The worker is the same process
at the end: no generated request crashed it.

Bounded: `EXAMPLES` requests per operation, Hypothesis's deadline off, one server.
The document's errata (places where the API's own answers do not fit its schema) are patched
on load, each with the reason, in `_errata`.
"""

from __future__ import annotations

import base64
import copy
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis

from tests.support.openai_spec import spec
from tests.support.schemathesis_runs import (
    bounded,
    call_and_check,
    chance,
    forget_video,
    small_video,
)
from tests.support.server import model_name
from tests.support.stt_audio import speech_wav
from tests.support.video_direct import HAS_FFMPEG
from worker.tiny_models import ensure_checkpoint

EXAMPLES = 25
MAX_OUTPUT_TOKENS = 6
_PIDS: list[int] = []
# The served models and the upload, for the hooks (set by the `target` fixture).
_TARGET: dict[str, Any] = {}
# Status codes seen per operation, to show the hooks made servable requests.
_STATUSES: defaultdict[str, list[int]] = defaultdict(list)


def _errata(document: dict[str, Any]) -> dict[str, Any]:
    """The document with its known errata patched; nothing else changes."""
    document = copy.deepcopy(document)
    paths = document["paths"]
    # The transcription answer is documented as oneOf(json, diarized, verbose_json), but none
    # of those forbids extra properties, so every verbose_json body matches two of them and
    # would fail a oneOf: the answer is one of them, which is anyOf.
    for path in ("/audio/transcriptions", "/audio/translations"):
        content = paths[path]["post"]["responses"]["200"]["content"]["application/json"]
        content["schema"] = {"anyOf": content["schema"]["oneOf"]}
    # A 404 of DELETE /responses/{id} is documented as a bare Error object; the API (and
    # every other error of the document) wraps it: {"error": Error}.
    delete_404 = paths["/responses/{response_id}"]["delete"]["responses"]["404"]
    delete_404["content"]["application/json"]["schema"] = {
        "$ref": "#/components/schemas/ErrorResponse"
    }
    # An embedding is documented as an array of floats only, but with `encoding_format:
    # "base64"` the API (and every SDK decoding it) sends the vector as a base64 string.
    embedding = document["components"]["schemas"]["Embedding"]["properties"]
    embedding["embedding"] = {"anyOf": [embedding["embedding"], {"type": "string"}]}
    # The Images API's documented examples (sent as they are, before any hook) ask for the
    # default size, 1024x1024: tens of seconds a picture for the tiny model on a CPU. Left out,
    # its requests are all generated, and the hooks keep their pictures small.
    for name in ("CreateImageRequest", "CreateImageEditRequest"):
        document["components"]["schemas"][name] = _without_examples(
            document["components"]["schemas"][name]
        )
    for path in ("/images/generations", "/images/edits"):
        for content in paths[path]["post"]["requestBody"]["content"].values():
            content.pop("examples", None)
            content.pop("example", None)
    # A video's `size` is documented as Sora's four sizes; the models served here make others
    # (the server answers the size it made, as a WIDTHxHEIGHT string).
    document["components"]["schemas"]["VideoSize"] = {"type": "string"}
    # An event stream's `schema` is documented as the schema of each event's `data` (JSON),
    # but OpenAPI (3.2's `itemSchema`, and schemathesis reading 3.1 the same way) takes it as
    # the schema of the event itself ({"event", "data", "id"}): every event would fail. Each
    # becomes the event whose `data` is that JSON, or chat's closing `[DONE]`.
    for item in paths.values():
        for operation in item.values():
            for answer in (
                operation.get("responses", {}).values() if isinstance(operation, dict) else ()
            ):
                stream = answer.get("content", {}).get("text/event-stream")
                if stream is not None and "schema" in stream:
                    stream["itemSchema"] = _event_with_json_data(stream.pop("schema"))
    return document


def _without_examples(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: _without_examples(v) for k, v in node.items() if k not in ("example", "examples")
        }
    if isinstance(node, list):
        return [_without_examples(v) for v in node]
    return node


def _event_with_json_data(data_schema: dict[str, Any]) -> dict[str, Any]:
    json_data = {"contentMediaType": "application/json", "contentSchema": data_schema}
    return {
        "type": "object",
        "required": ["data"],
        "properties": {"data": {"type": "string", "if": {"const": "[DONE]"}, "else": json_data}},
    }


SCHEMA = schemathesis.openapi.from_dict(_errata(spec()))


@pytest.fixture(scope="module")
def target(
    full_server, qwen3_path, speech_paths, embedding_path, tmp_path_factory
) -> Iterator[dict[str, Any]]:
    wav = speech_wav(tmp_path_factory.mktemp("schemathesis") / "hi.wav", "Hello there.")
    _PIDS.append(full_server.worker_pid())
    _TARGET.update(
        chat=model_name(qwen3_path),
        tts=model_name(speech_paths["tts"]),
        asr=model_name(speech_paths["asr"]),
        embed=model_name(embedding_path),
        image=model_name(str(ensure_checkpoint("z_image", "tiny"))),
        video=model_name(str(ensure_checkpoint("minimax_h3", "tiny"))),
        wav=Path(wav).read_bytes(),
        png=_png(),
        png_url="data:image/png;base64," + base64.b64encode(_png()).decode(),
    )
    _TARGET["server"] = full_server
    if not HAS_FFMPEG:  # no video model on the full server
        yield {"server": full_server, **_TARGET}
        return
    with _api(full_server) as client:
        made = [_small_video(client) for _ in range(4)]
        _TARGET["video"] = _finished(client, made[0])  # GET paths: a completed job
        _TARGET["videos_to_delete"] = made[1:]
        yield {"server": full_server, **_TARGET}


def _api(server) -> httpx.Client:
    headers = {"Authorization": f"Bearer {server.api_key}"}
    return httpx.Client(base_url=server.url, headers=headers, timeout=60)


def _small_video(client: httpx.Client) -> str:
    body = {"prompt": "a teal square", "size": "32x32", "num_inference_steps": 2}
    return client.post("/v1/videos", json=body).json()["id"]


def _finished(client: httpx.Client, video_id: str) -> str:
    for _ in range(600):
        if client.get(f"/v1/videos/{video_id}").json()["status"] == "completed":
            return video_id
        time.sleep(0.1)
    raise AssertionError(f"the video job {video_id} did not complete")


_MODEL_OF = {
    "/chat/completions": "chat",
    "/completions": "chat",
    "/responses": "chat",
    "/audio/speech": "tts",
    "/audio/transcriptions": "asr",
    "/audio/translations": "asr",
    "/embeddings": "embed",
    "/images/generations": "image",
    "/images/edits": "image",
    "/videos": "video",
}
_CAPPED = ("max_tokens", "max_completion_tokens", "max_output_tokens")
# Most generated bodies hold some field this server refuses (a 400 naming it, which is right);
# a share of them is cut down to these fields, so that answers of every kind are checked too.
_SERVABLE = {
    "/completions": {
        "model", "prompt", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options",
        "logprobs", "echo", "stop", "seed", "presence_penalty", "frequency_penalty", "user",
    },
    "/responses": {
        "model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "stream",
        "store", "metadata", "top_logprobs", "parallel_tool_calls", "user", "truncation",
    },
    "/images/edits": {"model", "prompt", "image", "images", "n", "size", "output_format", "user"},
}  # fmt: skip


@SCHEMA.hook("map_body")
def _servable(context, body):
    """Point most requests at a served model and keep generation short."""
    if not isinstance(body, dict) or not _TARGET:
        return body
    path = context.operation.path
    roll = chance(body)
    kind = _MODEL_OF.get(path)
    if kind is not None and roll < 0.9:
        body["model"] = _TARGET[kind]
    if path in _SERVABLE and roll < 0.5:
        for name in set(body) - _SERVABLE[path]:
            del body[name]
        if path == "/completions" and not isinstance(body.get("prompt"), str):
            body["prompt"] = "Once upon a time"
        if path == "/responses" and not isinstance(body.get("input"), str):
            body["input"] = "Hello"
    for name in _CAPPED:
        if isinstance(body.get(name), int) and not isinstance(body.get(name), bool):
            body[name] = max(1, min(body[name], MAX_OUTPUT_TOKENS))
    if path in ("/chat/completions", "/completions"):
        body.setdefault("max_tokens", MAX_OUTPUT_TOKENS)
        if isinstance(body.get("n"), int):
            body["n"] = min(body["n"], 2)
        if isinstance(body.get("best_of"), int):
            body["best_of"] = min(body["best_of"], 2)
    if path == "/responses":
        body.setdefault("max_output_tokens", MAX_OUTPUT_TOKENS)
    if path == "/audio/speech" and roll < 0.7:
        body["voice"] = "vivian"
        if isinstance(body.get("input"), str):
            body["input"] = body["input"][:40]
    if path.startswith("/audio/transcriptions") or path.startswith("/audio/translations"):
        if roll < 0.8:
            body["file"] = _TARGET["wav"]
    if path == "/videos":
        small_video(body)
    if path.startswith("/images/"):
        if roll < 0.8 or _pixels(body.get("size")) > 64 * 64:
            body["size"] = "32x32"  # (auto: 1024x1024, seconds a picture here)
        if isinstance(body.get("n"), int):
            body["n"] = min(body["n"], 2)
        if path == "/images/edits" and roll < 0.8:
            if not str(body.get("prompt") or "").strip():
                body["prompt"] = "a teal square"
    return body


def _edit_picture(body: dict[str, Any], as_json: bool) -> None:
    """Most edits get a real picture: in OpenAI's JSON shape by data: URL, in the form as a
    file (set in the test, where the media type is known: a map_body hook does not see it)."""
    if chance(body) >= 0.8:
        return
    if as_json:
        body["images"] = [{"image_url": _TARGET["png_url"]}]
        body.pop("image", None)
    else:
        body["image"] = _TARGET["png"]


def _pixels(size: Any) -> int:
    """Pixels of a generated `size` (0: one that is no WIDTHxHEIGHT, a 400 to keep)."""
    if size is None or size == "auto":
        return 1024 * 1024
    parts = str(size).lower().split("x")
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        return int(parts[0]) * int(parts[1])
    return 0


def _png() -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), "teal").save(buffer, format="PNG")
    return buffer.getvalue()


@SCHEMA.hook("map_path_parameters")
def _served_model_id(context, path_parameters):
    if not _TARGET or chance(path_parameters) >= 0.5:
        return path_parameters
    if context.operation.path == "/models/{model}":
        path_parameters["model"] = _TARGET["chat"]
    elif context.operation.path.startswith("/videos/{video_id}"):
        deleting = context.operation.method.upper() == "DELETE"
        if deleting and _TARGET["videos_to_delete"]:
            path_parameters["video_id"] = _TARGET["videos_to_delete"].pop()
        elif not deleting:
            path_parameters["video_id"] = _TARGET["video"]
    return path_parameters


@SCHEMA.hook("after_call")
def _record(context, case, response):
    _STATUSES[f"{case.method} {context.operation.path}"].append(response.status_code)
    if case.method.upper() == "POST" and context.operation.path == "/videos":
        forget_video(_TARGET["server"], response)


@SCHEMA.parametrize()
@bounded(EXAMPLES)
def test_generated_requests_get_no_5xx_and_conforming_answers(case, target):
    server = target["server"]
    if case.path == "/videos":
        small_video(case.body)
    if case.path == "/images/edits" and isinstance(case.body, dict):
        _edit_picture(case.body, case.media_type == "application/json")
    call_and_check(case, server, f"{server.url}/v1")


def test_the_worker_survived_every_generated_request(target):
    assert target["server"].worker_pid() == _PIDS[0]


def test_every_operation_was_answered_with_success_at_least_once():
    # Without it the hooks could make every request a 4xx and the run above prove little.
    operations = {f"{m.upper()} {p}" for p, item in spec()["paths"].items() for m in item}
    operations -= {"parameters"}
    if not HAS_FFMPEG:  # (no video model: the video paths answer 400)
        operations = {op for op in operations if "/videos" not in op}
    succeeded = {op for op, codes in _STATUSES.items() if any(200 <= c < 300 for c in codes)}
    assert operations - {"DELETE /responses/{response_id}", "GET /responses/{response_id}"} <= (
        succeeded
    ), dict(_STATUSES)
