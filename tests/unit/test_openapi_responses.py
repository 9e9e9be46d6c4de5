"""The response side of /openapi.json (gateway/openapi/responses.py): every operation documents
a 2xx and the errors it can answer, every `$ref` resolves, the schemas are valid JSON Schema
2020-12, and real answers of the app (over the scripted fake engine) conform: JSON bodies by
`jsonschema`, and every answer, server-sent events included, by schemathesis' own
`validate_response`, the check CI runs against the real server."""

from __future__ import annotations

import base64
import copy
import json
import struct
from typing import Any

import jsonschema
import msgspec
import pytest
import schemathesis
from schemathesis.core.failures import Failure, FailureGroup
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from gateway.app import ROUTES
from gateway.http.auth import OPEN_PATHS
from gateway.openapi.response_parts import SSE
from gateway.openapi.responses import (
    COMPONENTS,
    OPERATION_IDS,
    is_open,
    operation_routes,
    responses_for,
)
from gateway.workers.client import WorkerEngineClient
from gateway.workers.errors import EngineUnavailable, QueueFull, SwapFailed
from protocol.messages import Delta, ErrorInfo, Segment, TokenLogprob, ToolCallDelta, Usage
from protocol.ready import (
    Capability,
    EmbeddingInfo,
    ScoreInfo,
    TranscriptionInfo,
)
from tests.support.fake_engine import (
    FakeEngine,
    accepted,
    config,
    failure,
    fake_checkpoint,
    finish,
    make_client,
    ready,
    text,
)
from tests.support.fake_speech import AUDIO, BODY, PCM, speech_script
from worker.runtime.stats import WorkerStats

BODY_OPERATIONS = {
    "createChatCompletion", "createCompletion", "createMessage", "countMessageTokens",
    "createResponse", "createSpeech", "createVoice", "createTranscription", "createTranslation",
    "createEmbedding", "rerank", "score", "tokenize", "detokenize", "loadModel",
}  # fmt: skip


def _parameters(path: str) -> list[dict[str, Any]]:
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    return [
        {"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in names
    ]


def document() -> dict[str, Any]:
    """A minimal OpenAPI 3.1 document: every operation's routes with its responses."""
    paths: dict[str, Any] = {}
    for op in OPERATION_IDS:
        for i, (method, path) in enumerate(operation_routes(op)):
            paths.setdefault(path, {})[method.lower()] = {
                "operationId": op if i == 0 else f"{op}{i}",
                "parameters": _parameters(path),
                "responses": responses_for(op),
            }
    return {
        "openapi": "3.1.0",
        "info": {"title": "test", "version": "0"},
        "paths": paths,
        "components": {"schemas": copy.deepcopy(COMPONENTS)},
    }


SCHEMA = schemathesis.openapi.from_dict(document())
ROOT = {"components": {"schemas": COMPONENTS}}


def validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator({"allOf": [schema], **ROOT})


def conforms(response, op: str, route: int = 0) -> None:
    """`response` is one `op` documents: its status, its media type, and its body (checked by
    jsonschema when JSON, and by schemathesis in any case)."""
    documented = responses_for(op)
    status = str(response.status_code)
    assert status in documented, f"{op} answered an undocumented {status}: {response.text[:300]}"
    media = response.headers["content-type"].split(";")[0].strip()
    content = documented[status]["content"]
    assert media in content, f"{op} {status} answered undocumented {media}"
    assert "x-request-id" in response.headers
    if media == "application/json":
        errors = list(validator(content[media]["schema"]).iter_errors(response.json()))
        assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]
    method, path = operation_routes(op)[route]
    response.request.read()  # a multipart upload's content is a stream until read
    SCHEMA[path][method].validate_response(response)


def sse(response) -> list[tuple[str, Any]]:
    """(event name, parsed data) of each event; [DONE] as the string."""
    out = []
    for block in response.text.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        name = next((line[7:] for line in lines if line.startswith("event: ")), "message")
        data = "\n".join(line[6:] for line in lines if line.startswith("data: "))
        out.append((name, data if data == "[DONE]" else json.loads(data)))
    return out


# -- the document's structure ----------------------------------------------------------------


def test_every_operation_documents_a_2xx_and_its_errors():
    for op in OPERATION_IDS:
        responses = responses_for(op)
        assert any(status.startswith("2") for status in responses), op
        assert "500" in responses, op
        paths = [path for _, path in operation_routes(op)]
        assert ("401" in responses) == (not all(is_open(p) for p in paths)), op
        if op in BODY_OPERATIONS:
            assert {"400", "413"} <= set(responses), op
        for status, response in responses.items():
            assert response["description"], (op, status)
            assert response["headers"]["x-request-id"]["required"] is True
            assert response["content"], (op, status)
        if "503" in responses and op != "health":
            assert "Retry-After" in responses["503"]["headers"]


def test_errors_are_in_the_shape_of_each_api():
    for op in OPERATION_IDS:
        anthropic = op in ("createMessage", "countMessageTokens")
        for status, response in responses_for(op).items():
            if status.startswith("2") or (op, status) == ("health", "503"):
                continue
            (schema,) = [c["schema"] for c in response["content"].values()]
            name = "AnthropicErrorResponse" if anthropic else "ErrorResponse"
            assert schema == {"$ref": f"#/components/schemas/{name}"}, (op, status)


def test_the_open_routes_are_the_ones_without_a_401():
    assert "401" not in responses_for("root") and "401" not in responses_for("health")
    assert "/health" in OPEN_PATHS
    assert "401" in responses_for("listModels") and "401" in responses_for("adminStats")


# The document and its page describe the API; they are not operations of it.
META = {("GET", "/openapi.json"), ("GET", "/docs")}


def test_every_route_the_app_serves_is_an_operation():
    served = {
        (method, route.path.replace(":path}", "}"))
        for route in ROUTES
        for method in getattr(route, "methods", None) or ()  # WebSockets: not in OpenAPI
        if method != "HEAD"
    } - META
    documented = {route for op in OPERATION_IDS for route in operation_routes(op)}
    assert served == documented, (served - documented, documented - served)


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []


def test_every_ref_resolves_in_the_components_and_every_component_is_used():
    everything = [COMPONENTS, *(responses_for(op) for op in OPERATION_IDS)]
    refs = {r for part in everything for r in _refs(part)}
    prefix = "#/components/schemas/"
    assert all(r.startswith(prefix) for r in refs), refs
    names = {r[len(prefix) :] for r in refs}
    assert names <= set(COMPONENTS), names - set(COMPONENTS)
    assert set(COMPONENTS) <= names, set(COMPONENTS) - names


def test_the_schemas_are_valid_json_schema_2020_12():
    for schema in COMPONENTS.values():
        jsonschema.Draft202012Validator.check_schema(schema)
    for op in OPERATION_IDS:
        for response in responses_for(op).values():
            for media in response["content"].values():
                jsonschema.Draft202012Validator.check_schema(media["schema"])


def test_each_call_returns_a_copy():
    responses_for("createChatCompletion")["200"]["content"].clear()
    assert responses_for("createChatCompletion")["200"]["content"]
    with pytest.raises(KeyError):
        responses_for("noSuchOperation")


# -- real answers ----------------------------------------------------------------------------

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
MESSAGE = {**CHAT, "max_tokens": 16}


def _reasoning(part: str) -> list[Delta]:
    return [Delta("r", reasoning=part, token_ids=[1])]


def _call(index: int, arguments: str, name: str | None = None, id: str | None = None):
    return [Delta("r", tool_calls=[ToolCallDelta(index, id, name, arguments)], token_ids=[1])]


def _logprob(token: str) -> list[Delta]:
    top = [[5, token, -0.5], [6, "x", -3.0]]
    return [Delta("r", text=token, token_ids=[5], logprobs=[TokenLogprob(5, token, -0.5, top)])]


TOOLS = [accepted(), _reasoning("hmm"), _call(0, '{"a"', "f", "call_1"), _call(0, ": 1}"), finish()]
LOGPROBS = [accepted(), _logprob("Hel"), _logprob("lo"), finish()]
TEXT = [accepted(), text("Hel", "lo"), finish()]
LENGTH = [accepted(), text("Hel"), finish("length")]


class RealisticEngine(FakeEngine):
    """The fake engine, answering health, stats and swaps with the real code's shapes."""

    def __init__(self, script=None) -> None:
        super().__init__(script)
        self.real = WorkerEngineClient(config())

    def health(self) -> tuple[int, dict]:
        sup = self.real._sup  # the real client's verdict, in the fake's state
        sup.ready = ready(Capability.CHAT) if self.state == "ready" else None
        sup._set_state(self.state, self.reason or f"the worker is {self.state}")
        return self.real.health()

    async def worker_stats(self) -> dict:
        if self.state != "ready":
            raise EngineUnavailable("no ready worker", 1.0)
        return msgspec.structs.asdict(WorkerStats(self.model_name).snapshot())

    async def swap(self, model_path: str, served_model_name: str | None = None) -> dict:
        await super().swap(model_path, served_model_name)
        # gateway/workers/client.py's `_swap` result
        return {
            "model": self.model_name, "model_path": model_path, "previous_model": "tiny",
            "worker_pid": 7, "aborted_requests": 0, "seconds": 1.25,
        }  # fmt: skip


def client_for(script=None, **overrides):
    return make_client(RealisticEngine(script), **overrides)


@pytest.mark.parametrize("accept", [None, "text/html"])
def test_root_and_health(accept):
    engine = RealisticEngine()
    with make_client(engine) as client:
        headers = {"accept": accept} if accept else {}
        conforms(client.get("/", headers=headers), "root")
        conforms(client.get("/v1"), "root", 1)
        healthy = client.get("/health")
        assert healthy.status_code == 200
        conforms(healthy, "health")
        engine.state = "restarting"
        unhealthy = client.get("/health")
        assert unhealthy.status_code == 503
        conforms(unhealthy, "health")


def test_root_without_the_key_leaves_the_models_out():
    with client_for(api_key="k") as client:
        body = client.get("/").json()
        assert "models" not in body
        conforms(client.get("/"), "root")


def test_metrics():
    with client_for() as client:
        response = client.get("/metrics")
        assert response.status_code == 200
        conforms(response, "metrics")
    with client_for(api_key="k") as client:
        conforms(client.get("/metrics"), "metrics")


def test_models():
    engine = RealisticEngine()
    with make_client(engine) as client:
        conforms(client.get("/v1/models"), "listModels")
        conforms(client.get("/v1/models/tiny"), "getModel")
        conforms(client.get("/v1/models/nope"), "getModel")
        engine.ready_info = None
        engine.state = "starting"
        conforms(client.get("/v1/models"), "listModels")


@pytest.mark.parametrize("script", [TEXT, TOOLS, LOGPROBS, LENGTH])
@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"n": 2, "logprobs": True, "top_logprobs": 1},
        {"stream": True},
        {"stream": True, "stream_options": {"include_usage": True}, "n": 2, "logprobs": True},
    ],
)
def test_chat_completions(script, extra):
    with client_for(script) as client:
        response = client.post("/v1/chat/completions", json={**CHAT, **extra})
        assert response.status_code == 200, response.text
        conforms(response, "createChatCompletion")


@pytest.mark.parametrize("script", [TEXT, LOGPROBS, LENGTH])
@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"n": 2, "logprobs": 1},
        {"echo": True},
        {"stream": True, "echo": True},
        {"stream": True, "stream_options": {"include_usage": True}, "logprobs": 1},
    ],
)
def test_completions(script, extra):
    with client_for(script) as client:
        response = client.post("/v1/completions", json={"model": "tiny", "prompt": "hi", **extra})
        assert response.status_code == 200, response.text
        conforms(response, "createCompletion")


@pytest.mark.parametrize("script", [TEXT, TOOLS, LENGTH])
@pytest.mark.parametrize("stream", [False, True])
def test_messages(script, stream):
    with client_for(script) as client:
        response = client.post("/v1/messages", json={**MESSAGE, "stream": stream})
        assert response.status_code == 200, response.text
        conforms(response, "createMessage")
        stop = client.post("/v1/messages", json={**MESSAGE, "stop_sequences": ["lo"]})
        conforms(stop, "createMessage")


def test_messages_with_context_management_and_token_counts():
    edits = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
    with client_for(TEXT) as client:
        conforms(client.post("/v1/messages/count_tokens", json=CHAT), "countMessageTokens")
        body = {**CHAT, "context_management": edits}
        counted = client.post("/v1/messages/count_tokens", json=body)
        assert counted.status_code == 200, counted.text
        conforms(counted, "countMessageTokens")
        for stream in (False, True):
            response = client.post(
                "/v1/messages", json={**MESSAGE, "context_management": edits, "stream": stream}
            )
            assert response.status_code == 200, response.text
            conforms(response, "createMessage")


@pytest.mark.parametrize("script", [TEXT, TOOLS, LOGPROBS, LENGTH])
@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"stream": True},
        {"stream": True, "include": ["message.output_text.logprobs"], "top_logprobs": 1},
        {
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
            "tool_choice": {"type": "function", "name": "f"},
            "instructions": "Be brief.",
            "metadata": {"k": "v"},
            "user": "u",
            "max_output_tokens": 5,
            "temperature": 0.5,
        },
    ],
)
def test_responses(script, extra):
    with client_for(script) as client:
        created = client.post("/v1/responses", json={"model": "tiny", "input": "hi", **extra})
        assert created.status_code == 200, created.text
        conforms(created, "createResponse")
        if not extra.get("stream"):
            response_id = created.json()["id"]
            conforms(client.get(f"/v1/responses/{response_id}"), "getResponse")
            conforms(client.delete(f"/v1/responses/{response_id}"), "deleteResponse")
            conforms(client.get(f"/v1/responses/{response_id}"), "getResponse")
            conforms(client.delete(f"/v1/responses/{response_id}"), "deleteResponse")


def test_a_stream_that_fails_after_it_started_ends_with_the_apis_error_event():
    script = [accepted(), text("Hel"), failure()]
    with client_for(script) as client:
        for op, path, body in [
            ("createChatCompletion", "/v1/chat/completions", CHAT),
            ("createCompletion", "/v1/completions", {"model": "tiny", "prompt": "hi"}),
            ("createMessage", "/v1/messages", MESSAGE),
            ("createResponse", "/v1/responses", {"model": "tiny", "input": "hi"}),
        ]:
            response = client.post(path, json={**body, "stream": True})
            assert response.status_code == 200
            names = [name for name, _ in sse(response)]
            assert "error" in names or any(
                isinstance(data, dict) and "error" in data for _, data in sse(response)
            ), (op, response.text)
            conforms(response, op)


def _speech_engine(script=None) -> RealisticEngine:
    engine = RealisticEngine(script or speech_script(*PCM))
    engine.ready_info = ready(
        Capability.CHAT, Capability.SPEECH, model="/models/chat", speech=AUDIO
    )
    return engine


WAV = b"RIFF\x24\x00\x00\x00WAVEfmt fake bytes the worker would decode"


@pytest.mark.parametrize(
    "extra",
    [{}, {"response_format": "pcm"}, {"stream": True}, {"stream_format": "sse"}],
)
def test_speech(extra):
    with make_client(_speech_engine()) as client:
        response = client.post("/v1/audio/speech", json={**BODY, **extra})
        assert response.status_code == 200, response.text
        conforms(response, "createSpeech")


def test_speech_sse_failing_after_the_start():
    script = [accepted(), [Delta("r", audio=PCM[0], sample_rate=8000)], failure()]
    with make_client(_speech_engine(script)) as client:
        response = client.post("/v1/audio/speech", json={**BODY, "stream_format": "sse"})
        assert sse(response)[-1][0] == "error"
        conforms(response, "createSpeech")


def test_voices():
    with make_client(_speech_engine()) as client:
        files = {"audio_sample": ("v.wav", WAV, "audio/wav")}
        saved = client.post("/v1/audio/voices", data={"name": "n", "transcript": "t"}, files=files)
        assert saved.status_code == 200, saved.text
        conforms(saved, "createVoice")
        no_transcript = client.post("/v1/audio/voices", data={"name": "m"}, files=files)
        conforms(no_transcript, "createVoice")
        conforms(client.post("/v1/audio/voices", data={"name": "x"}), "createVoice")
        listed = client.get("/v1/audio/voices")
        assert len(listed.json()["voices"]) == 4
        conforms(listed, "listVoices")
        voice_id = saved.json()["id"]
        conforms(client.delete(f"/v1/audio/voices/{voice_id}"), "deleteVoice")
        conforms(client.delete(f"/v1/audio/voices/{voice_id}"), "deleteVoice")


def test_speech_routes_without_a_speech_model():
    with client_for() as client:
        conforms(client.get("/v1/audio/voices"), "listVoices")
        conforms(client.post("/v1/audio/speech", json=BODY), "createSpeech")


SEGMENTS = [Segment(0, 0.0, 1.5, " Hello", [[" Hello", 0.0, 1.5]]), Segment(1, 1.5, 3.0, " world.")]


def _asr_engine(script=None) -> RealisticEngine:
    done = Delta("r", finish_reason="stop", usage=Usage(3, 4), segments=SEGMENTS, language="en")
    engine = RealisticEngine(script or [accepted(), [Delta("r", text="Hello")], [done]])
    engine.model_name, engine.model_path = "whisper-tiny", "/models/whisper-tiny"
    asr = TranscriptionInfo("/models/whisper-tiny", "whisper", 16000, True)
    caps = (Capability.TRANSCRIBE, Capability.TRANSLATE)
    engine.ready_info = ready(*caps, model=engine.model_path, text=None, transcription=asr)
    return engine


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"response_format": "text"},
        {"response_format": "srt"},
        {"response_format": "vtt"},
        {"response_format": "verbose_json"},
        {"response_format": "verbose_json", "timestamp_granularities[]": "word"},
        {"stream": "true"},
    ],
)
@pytest.mark.parametrize("task", ["transcriptions", "translations"])
def test_transcriptions_and_translations(fields, task):
    if task == "translations" and ("stream" in fields or "timestamp_granularities[]" in fields):
        return
    op = "createTranscription" if task == "transcriptions" else "createTranslation"
    with make_client(_asr_engine()) as client:
        response = client.post(
            f"/v1/audio/{task}",
            data={"model": "whisper-tiny", **fields},
            files={"file": ("a.wav", WAV, "audio/wav")},
        )
        assert response.status_code == 200, response.text
        conforms(response, op)


def test_a_transcription_stream_failing_after_the_start():
    script = [accepted(), [Delta("r", text="Hello")], failure()]
    with make_client(_asr_engine(script)) as client:
        response = client.post(
            "/v1/audio/transcriptions",
            data={"model": "whisper-tiny", "stream": "true"},
            files={"file": ("a.wav", WAV, "audio/wav")},
        )
        assert sse(response)[-1] == ("message", "[DONE]")
        conforms(response, "createTranscription")


EMBED = EmbeddingInfo("/models/tiny", "mlx-embeddings", "bert", 4, "mean", True, 16, 3, 100)
CROSS = ScoreInfo("/models/tiny", "cross-encoder", "bert", 64, 3, 1000)


def _vector(values: list[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_embeddings(encoding):
    done = Delta("r", finish_reason="stop", usage=Usage(7, 0), embeddings=[_vector([0.5] * 4)] * 2)
    engine = RealisticEngine([accepted(), [done]])
    engine.ready_info = ready(Capability.EMBED, text=None, embedding=EMBED)
    with make_client(engine) as client:
        body = {"model": "tiny", "input": ["a", "b"], "encoding_format": encoding}
        response = client.post("/v1/embeddings", json=body)
        assert response.status_code == 200, response.text
        if encoding == "base64":
            assert base64.b64decode(response.json()["data"][0]["embedding"])
        conforms(response, "createEmbedding")


@pytest.mark.parametrize("route", [0, 1, 2])
def test_rerank_and_score(route):
    done = Delta("r", finish_reason="stop", usage=Usage(11, 0), scores=[0.1, 0.9])
    engine = RealisticEngine([accepted(), [done]])
    engine.ready_info = ready(Capability.RERANK, Capability.SCORE, text=None, score=CROSS)
    with make_client(engine) as client:
        _, path = operation_routes("rerank")[route]
        for extra in ({}, {"return_documents": False, "top_n": 1}):
            body = {"model": "tiny", "query": "q", "documents": ["a", "b"], **extra}
            response = client.post(path, json=body)
            assert response.status_code == 200, response.text
            conforms(response, "rerank", route)
        _, path = operation_routes("score")[min(route, 1)]
        body = {"model": "tiny", "text_1": "q", "text_2": ["a", "b"]}
        response = client.post(path, json=body)
        assert response.status_code == 200, response.text
        conforms(response, "score", min(route, 1))


def test_tokenize_and_detokenize():
    with client_for() as client:
        for body in (
            {"prompt": "hi"},
            {"model": "tiny", "prompt": "hi", "return_token_strs": True},
        ):
            response = client.post("/tokenize", json=body)
            assert response.status_code == 200, response.text
            conforms(response, "tokenize")
        conforms(client.post("/tokenize", json={"messages": CHAT["messages"]}), "tokenize")
        conforms(client.post("/detokenize", json={"tokens": [1, 2]}), "detokenize")
        conforms(client.post("/tokenize", json={"model": "nope", "prompt": "x"}), "tokenize")


def test_admin(tmp_path):
    fake_checkpoint(tmp_path)
    engine = RealisticEngine()
    with make_client(engine) as client:
        conforms(client.get("/v1/admin/stats"), "adminStats")
        loaded = client.post("/v1/admin/models/load", json={"model": str(tmp_path)})
        assert loaded.status_code == 200, loaded.text
        conforms(loaded, "loadModel")
        conforms(client.post("/v1/admin/models/load", json={"model": "/no/such"}), "loadModel")
        conforms(client.post("/v1/admin/models/load", json={"x": 1}), "loadModel")
        for error, status in (
            (SwapFailed("weights missing", restored=True), 502),
            (EngineUnavailable("the engine is stopped", None), 503),
        ):
            engine.swap_error = error
            response = client.post("/v1/admin/models/load", json={"model": str(tmp_path)})
            assert response.status_code == status
            conforms(response, "loadModel")
        engine.state = "restarting"
        conforms(client.get("/v1/admin/stats"), "adminStats")


# -- errors ----------------------------------------------------------------------------------

BODIES: dict[str, tuple[str, dict[str, Any]]] = {
    "createChatCompletion": ("/v1/chat/completions", CHAT),
    "createCompletion": ("/v1/completions", {"model": "tiny", "prompt": "hi"}),
    "createMessage": ("/v1/messages", MESSAGE),
    "countMessageTokens": ("/v1/messages/count_tokens", CHAT),
    "createResponse": ("/v1/responses", {"model": "tiny", "input": "hi"}),
    "tokenize": ("/tokenize", {"prompt": "hi"}),
    "detokenize": ("/detokenize", {"tokens": [1]}),
}


@pytest.mark.parametrize("op", sorted(BODIES))
def test_errors_of_json_routes(op):
    path, body = BODIES[op]
    with client_for(max_body_bytes=100) as client:
        response = client.post(path, content=b"x" * 200)
        assert response.status_code == 413
        conforms(response, op)
    engine = RealisticEngine()
    with make_client(engine) as client:
        for bad in (b"{", b"[]", json.dumps({**body, "bogus": 1}).encode()):
            response = client.post(path, content=bad)
            assert response.status_code == 400
            conforms(response, op)
        if "model" in body:
            response = client.post(path, json={**body, "model": "nope"})
            assert response.status_code == 404
            conforms(response, op)
        engine.admission_error = QueueFull("the queue is full", 2.0)
        engine.count_error = EngineUnavailable("no ready worker", 1.0)
        engine.tokenize_error = EngineUnavailable("no ready worker", 1.0)
        response = client.post(path, json=body)
        assert response.status_code == 503, response.text
        conforms(response, op)
        assert response.headers["retry-after"] in ("1", "2")
        engine.admission_error = engine.count_error = engine.tokenize_error = None
        engine.script = [accepted(), failure()]
        if op not in ("countMessageTokens", "tokenize", "detokenize"):
            response = client.post(path, json=body)
            assert response.status_code == 500
            conforms(response, op)
    with client_for(api_key="k") as client:
        response = client.post(path, json=body)
        assert response.status_code == 401
        conforms(response, op)


def test_context_length_and_swap_errors():
    too_long = [
        Delta("r", finish_reason="error", error=ErrorInfo("context_length_exceeded", "long", 9, 4))
    ]
    swap = [Delta("r", finish_reason="error", error=ErrorInfo("model_swap", "swapping"))]
    for script, status in (([accepted(), too_long], 400), ([too_long], 400), ([swap], 503)):
        with client_for(script) as client:
            for op in ("createChatCompletion", "createMessage", "createResponse"):
                path, body = BODIES[op]
                response = client.post(path, json=body)
                assert response.status_code == status, (op, response.text)
                conforms(response, op)


def test_errors_of_get_routes():
    with client_for(api_key="k") as client:
        for op, path in [
            ("listModels", "/v1/models"),
            ("getModel", "/v1/models/tiny"),
            ("getResponse", "/v1/responses/x"),
            ("deleteResponse", "/v1/responses/x"),
            ("listVoices", "/v1/audio/voices"),
            ("deleteVoice", "/v1/audio/voices/x"),
            ("adminStats", "/v1/admin/stats"),
        ]:
            method = operation_routes(op)[0][0]
            response = client.request(method, path)
            assert response.status_code == 401
            conforms(response, op)


def test_errors_of_upload_and_model_routes():
    engine = _speech_engine()
    with make_client(engine, max_body_bytes=100) as client:
        big = {"file": ("a.wav", WAV * 10, "audio/wav")}
        conforms(client.post("/v1/audio/transcriptions", files=big), "createTranscription")
        conforms(client.post("/v1/audio/translations", files=big), "createTranslation")
        conforms(client.post("/v1/audio/voices", files=big), "createVoice")
        conforms(client.post("/v1/audio/speech", content=b"x" * 200), "createSpeech")
        conforms(client.post("/v1/embeddings", content=b"x" * 200), "createEmbedding")
        conforms(client.post("/v1/rerank", content=b"x" * 200), "rerank")
        conforms(client.post("/v1/score", content=b"x" * 200), "score")
        conforms(client.post("/v1/admin/models/load", content=b"x" * 200), "loadModel")
    with make_client(engine) as client:
        conforms(client.post("/v1/audio/transcriptions", json={}), "createTranscription")
        files = {"file": ("a.wav", WAV, "audio/wav")}
        conforms(client.post("/v1/audio/transcriptions", data={"model": "x"}, files=files),
                 "createTranscription")  # fmt: skip
        conforms(
            client.post("/v1/embeddings", json={"model": "tiny", "input": "a"}), "createEmbedding"
        )
        conforms(
            client.post("/v1/embeddings", json={"model": "x", "input": "a"}), "createEmbedding"
        )
        conforms(
            client.post("/v1/rerank", json={"model": "x", "query": "q", "documents": ["a"]}),
            "rerank",
        )
        conforms(client.post("/v1/audio/speech", json={**BODY, "voice": "nobody"}), "createSpeech")
        engine.state = "restarting"
        for op, path, body in [
            ("createEmbedding", "/v1/embeddings", {"model": "tiny", "input": "a"}),
            ("rerank", "/v1/rerank", {"model": "tiny", "query": "q", "documents": ["a"]}),
            ("score", "/v1/score", {"model": "tiny", "text_1": "q", "text_2": "a"}),
            ("createSpeech", "/v1/audio/speech", BODY),
        ]:
            response = client.post(path, json=body)
            assert response.status_code == 503, (op, response.text)
            conforms(response, op)
        conforms(client.get("/v1/audio/voices"), "listVoices")
        response = client.post("/v1/audio/transcriptions", data={"model": "x"}, files=files)
        assert response.status_code == 503
        conforms(response, "createTranscription")


def test_schemathesis_rejects_a_body_that_does_not_conform():
    """The checks above can fail: a wrong JSON body, and a wrong event inside a stream."""
    with client_for() as client:
        response = client.post("/v1/chat/completions", json=CHAT)
    wrong = copy.deepcopy(response.json())
    del wrong["choices"][0]["message"]["content"]
    schema = responses_for("createChatCompletion")["200"]["content"]["application/json"]["schema"]
    assert not list(validator(schema).iter_errors(response.json()))
    assert list(validator(schema).iter_errors(wrong))

    def forged(body: bytes):
        app = Starlette(
            routes=[Route("/", lambda _: Response(body, media_type=SSE), methods=["POST"])]
        )
        return TestClient(app).post("/")

    operation = SCHEMA["/v1/chat/completions"]["POST"]
    good = b'data: {"error": {"message": "m", "type": "t", "param": null, "code": null}}\n\ndata: [DONE]\n\n'
    operation.validate_response(forged(good))
    for bad in (
        b'data: {"id": "x", "object": "chat.completion.chunk"}\n\ndata: [DONE]\n\n',
        b"data: not json\n\n",
        b'event: other\ndata: {"error": {"message": "m", "type": "t", "param": null, "code": null}}\n\n',
    ):
        with pytest.raises((Failure, FailureGroup)):
            operation.validate_response(forged(bad))
