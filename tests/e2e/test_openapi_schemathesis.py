"""Schemathesis against the real server, from the server's own /openapi.json.

The document is the one the gateway serves (built from the tables its parsers check bodies
against; a test below checks the served one is this one), so this finds where what is
documented and what is done part: a schema-valid request that gets a 5xx, or an answer that
does not match its documented schema. Hooks point requests at the served models, keep
generation short and pictures small, and upload a real WAV and a PNG, as in
test_schemathesis.py. Bounded: `EXAMPLES` per
operation. Left out: `loadModel` (it would swap the model under the other operations).
"""

from __future__ import annotations

import base64
import io
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from PIL import Image

from gateway.openapi.document import build_document
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

EXAMPLES = 20
MAX_OUTPUT_TOKENS = 6
DOCUMENT = build_document(api_key_required=True)
SCHEMA = schemathesis.openapi.from_dict(DOCUMENT).exclude(operation_id="loadModel")
_PIDS: list[int] = []
_TARGET: dict[str, Any] = {}
_STATUSES: defaultdict[str, list[int]] = defaultdict(list)

_MODEL_OF = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "chat",
    "/v1/messages": "chat",
    "/v1/messages/count_tokens": "chat",
    "/v1/responses": "chat",
    "/tokenize": "chat",
    "/detokenize": "chat",
    "/v1/audio/speech": "tts",
    "/v1/audio/transcriptions": "asr",
    "/v1/audio/translations": "asr",
    "/v1/embeddings": "embed",
    "/v1/images/generations": "image",
    "/v1/images/edits": "image",
    "/v1/videos": "video",
}
_CAPPED = ("max_tokens", "max_completion_tokens", "max_output_tokens")
# Most generated bodies hold some value this server refuses (a 400 naming it, which is right);
# a share of them is cut down to these fields, so that answers of every kind are checked too.
_SERVABLE = {
    "/v1/chat/completions": ({"model", "messages", "max_tokens", "temperature", "top_p", "n",
                              "stream", "stream_options", "logprobs", "top_logprobs", "stop",
                              "seed", "user", "metadata"}, "messages"),
    "/v1/responses": ({"model", "input", "instructions", "max_output_tokens", "temperature",
                       "top_p", "stream", "store", "metadata", "top_logprobs", "user"}, "input"),
    "/tokenize": ({"model", "prompt", "add_special_tokens", "return_token_strs"}, "prompt"),
    "/v1/images/edits": ({"model", "prompt", "image", "images", "n", "size", "seed",
                          "num_inference_steps", "output_format"}, "prompt"),
}  # fmt: skip
_HELLO = [{"role": "user", "content": "Hello"}]
_FILES = {"/v1/audio/transcriptions": "file", "/v1/audio/translations": "file",
          "/v1/audio/voices": "audio_sample"}  # fmt: skip


@pytest.fixture(scope="module")
def target(full_server, qwen3_path, speech_paths, embedding_path, tmp_path_factory):
    wav = speech_wav(tmp_path_factory.mktemp("openapi") / "hi.wav", "Hello there.")
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
    )
    _TARGET["server"] = full_server
    return {"server": full_server, **_TARGET}


@SCHEMA.hook("map_body")
def _servable(context, body):
    if not isinstance(body, dict) or not _TARGET:
        return body
    path = context.operation.path
    roll = chance(body)
    kind = _MODEL_OF.get(path)
    if kind is not None and roll < 0.9:
        body["model"] = _TARGET[kind]
    if path in _SERVABLE and roll < 0.5:
        keep, prompt = _SERVABLE[path]
        for name in set(body) - keep:
            del body[name]
        body[prompt] = _HELLO if prompt == "messages" else "Hello"
    for name in _CAPPED:
        if isinstance(body.get(name), int) and not isinstance(body.get(name), bool):
            body[name] = max(1, min(body[name], MAX_OUTPUT_TOKENS))
    if path in ("/v1/chat/completions", "/v1/completions"):
        body.setdefault("max_tokens", MAX_OUTPUT_TOKENS)
        for name in ("n", "best_of"):
            if isinstance(body.get(name), int):
                body[name] = min(body[name], 2)
    if path == "/v1/responses":
        body.setdefault("max_output_tokens", MAX_OUTPUT_TOKENS)
    if path == "/v1/messages" and isinstance(body.get("max_tokens"), int):
        body["max_tokens"] = max(1, min(body["max_tokens"], MAX_OUTPUT_TOKENS))
    if path == "/v1/audio/speech" and roll < 0.7:
        body["voice"] = "vivian"
        if isinstance(body.get("input"), str):
            body["input"] = body["input"][:40]
        for name in ("ref_audio", "ref_text", "voice_audio"):
            body.pop(name, None)
    if path in _FILES and roll < 0.8:
        body[_FILES[path]] = _TARGET["wav"]
    if path.startswith("/v1/images/"):
        _small_pictures(path, body, roll)
    if path == "/v1/videos":
        small_video(body)
    return body


def _small_pictures(path: str, body: dict[str, Any], roll: float) -> None:
    """Pictures the tiny image model makes in milliseconds (auto is 1024x1024: seconds)."""
    size = str(body.get("size") or "auto").lower().split("x")
    if roll < 0.8 or size == ["auto"] or (len(size) == 2 and all(p.isdigit() for p in size)):
        body["size"] = "32x32"
    for name, most in (("n", 2), ("num_inference_steps", 4)):
        if isinstance(body.get(name), int) and not isinstance(body.get(name), bool):
            body[name] = min(body[name], most)


def _edit_picture(body: dict[str, Any], as_json: bool, roll: float) -> None:
    """Most edits get a real picture: in OpenAI's JSON shape by data: URL, in the form as a
    file (set where the media type is known: a map_body hook does not see it)."""
    if roll >= 0.8:
        return
    if as_json:
        url = "data:image/png;base64," + base64.b64encode(_TARGET["png"]).decode()
        body["images"] = [{"image_url": url}]
        body.pop("image", None)
    else:
        body["image"] = _TARGET["png"]


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), "teal").save(buffer, format="PNG")
    return buffer.getvalue()


@SCHEMA.hook("map_path_parameters")
def _served_model_id(context, path_parameters):
    if (
        path_parameters
        and "model_id" in path_parameters
        and _TARGET
        and chance(path_parameters) < 0.5
    ):
        path_parameters["model_id"] = _TARGET["chat"]
    return path_parameters


@SCHEMA.hook("after_call")
def _record(context, case, response):
    _STATUSES[f"{case.method} {context.operation.path}"].append(response.status_code)
    if case.method.upper() == "POST" and context.operation.path == "/v1/videos":
        forget_video(_TARGET["server"], response)


@SCHEMA.parametrize()
@bounded(EXAMPLES)
def test_generated_requests_get_no_5xx_and_answers_as_documented(case, target):
    server = target["server"]
    if case.path == "/v1/videos":
        small_video(case.body)
    if case.path.startswith("/v1/images/") and isinstance(case.body, dict):
        # The cases schemathesis derives from the document itself (its coverage examples, run
        # in the explicit phase) skip the map_body hook; their pictures are kept small here too.
        roll = chance(case.body)
        _small_pictures(case.path, case.body, roll)
        if case.path == "/v1/images/edits":
            _edit_picture(case.body, case.media_type == "application/json", roll)
    call_and_check(case, server, server.url)


def test_the_worker_survived_every_generated_request(target):
    assert target["server"].worker_pid() == _PIDS[0]


def test_most_operations_were_answered_with_success(target):
    # Without it the hooks could make every request a 4xx and the run above prove little.
    # Left out: no reranker is served here; ids that must exist first; the swap; the
    # models-file operations (this server has one worker); LoRA adapters (a directory on the
    # server, and a loaded one's name).
    never = {"POST /v1/rerank", "POST /v2/rerank", "POST /rerank", "POST /v1/score",
             "POST /score", "GET /v1/responses/{response_id}",
             "DELETE /v1/responses/{response_id}", "DELETE /v1/audio/voices/{voice_id}",
             "POST /v1/admin/models/load", "POST /v1/admin/models/unload",
             "POST /v1/admin/models/pin", "POST /v1/load_lora_adapter",
             "POST /v1/unload_lora_adapter", "GET /v1/videos/{video_id}",
             "DELETE /v1/videos/{video_id}", "GET /v1/videos/{video_id}/content"}  # fmt: skip
    if not HAS_FFMPEG:  # (no video model on the full server)
        never.add("POST /v1/videos")
    operations = {f"{m.upper()} {p}" for p, item in DOCUMENT["paths"].items() for m in item}
    succeeded = {op for op, codes in _STATUSES.items() if any(200 <= c < 300 for c in codes)}
    assert operations - never <= succeeded, dict(_STATUSES)


def test_the_served_document_is_this_one(target):
    server = target["server"]
    served = httpx.get(f"{server.url}/openapi.json", headers=server.headers, timeout=10)
    assert served.status_code == 200 and served.json() == DOCUMENT
    assert httpx.get(f"{server.url}/openapi.json", timeout=10).status_code == 401
