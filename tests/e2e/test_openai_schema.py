"""The real server's OpenAI responses and stream events conform to the official OpenAPI document.

Every body and every SSE event of the served operations is validated against the schema the
vendored document gives for it (tests/support/openai_spec.py): chat completions (plain, n > 1 with
logprobs, tool calls, structured output, streamed), completions, Responses (with a function
call, streamed, stored, deleted), models, speech SSE events, transcriptions and translations
in json / verbose_json / streamed, embeddings, and the 4xx error bodies.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.openai_spec import sse_events, validate
from tests.support.server import model_name
from tests.support.stt_audio import speech_wav

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
HELLO = [{"role": "user", "content": "Hello"}]


@pytest.fixture(scope="module")
def chat_model(qwen3_path) -> str:
    return model_name(qwen3_path)


@pytest.fixture(scope="module")
def wav(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("schema-audio") / "hello.wav"
    return speech_wav(path, "Hello world. This is a test.").read_bytes()


def _post(server, path: str, **kwargs) -> httpx.Response:
    return httpx.post(f"{server.url}/v1{path}", headers=server.headers, timeout=120, **kwargs)


def _ok(response: httpx.Response) -> httpx.Response:
    assert response.status_code == 200, response.text
    return response


def _with_finish(chunk: dict, reason: str) -> dict:
    return {**chunk, "choices": [{**c, "finish_reason": reason} for c in chunk["choices"]]}


def _stream_events(response: httpx.Response, schema: str) -> list:
    _ok(response)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [data for _, data in sse_events(response.text) if data != "[DONE]"]
    assert events
    for event in events:
        validate(schema, event)
    return events


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"n": 2, "logprobs": True, "top_logprobs": 2, "seed": 3},
        {"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "city", "schema": TOOL["function"]["parameters"]},
            }
        },
    ],
    ids=["plain", "n-logprobs", "tool-call", "json-schema"],
)
def test_chat_completion_bodies_conform(full_server, chat_model, extra):
    body = {"model": chat_model, "messages": HELLO, "max_tokens": 24, **extra}
    reply = _ok(_post(full_server, "/chat/completions", json=body)).json()
    validate("CreateChatCompletionResponse", reply)
    assert reply["choices"][0]["message"]["refusal"] is None


@pytest.mark.parametrize(
    "extra",
    [
        {"stream_options": {"include_usage": True}, "logprobs": True, "top_logprobs": 1},
        {"tools": [TOOL], "tool_choice": "required"},
    ],
    ids=["usage-logprobs", "tool-call"],
)
def test_chat_completion_chunks_conform(full_server, chat_model, extra):
    body = {"model": chat_model, "messages": HELLO, "max_tokens": 16, "stream": True, **extra}
    _stream_events(
        _post(full_server, "/chat/completions", json=body), "CreateChatCompletionStreamResponse"
    )


@pytest.mark.parametrize("stream", [False, True])
def test_completion_bodies_and_chunks_conform(full_server, chat_model, stream):
    body = {"model": chat_model, "prompt": "Once", "max_tokens": 8, "logprobs": 2}
    response = _post(full_server, "/completions", json={**body, "stream": stream})
    if not stream:
        validate("CreateCompletionResponse", _ok(response).json())
        return
    # The document gives completions no stream schema. OpenAI streams CreateCompletionResponse
    # objects whose finish_reason is null until the last: every chunk must be one but for that.
    chunks = [data for _, data in sse_events(_ok(response).text) if data != "[DONE]"]
    for chunk in chunks[:-1]:
        assert [c["finish_reason"] for c in chunk["choices"]] == [None]
        validate("CreateCompletionResponse", _with_finish(chunk, "length"))
    validate("CreateCompletionResponse", chunks[-1])
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_a_response_its_stored_copy_and_its_deletion_conform(full_server, chat_model):
    body = {"model": chat_model, "input": "Hello", "max_output_tokens": 16}
    created = _ok(_post(full_server, "/responses", json=body)).json()
    validate("Response", created)
    url = f"{full_server.url}/v1/responses/{created['id']}"
    stored = _ok(httpx.get(url, headers=full_server.headers, timeout=30)).json()
    validate("Response", stored)
    # The document gives the deletion no body; ours says what went.
    deleted = _ok(httpx.delete(url, headers=full_server.headers, timeout=30)).json()
    assert (deleted["id"], deleted["deleted"]) == (created["id"], True)
    assert httpx.get(url, headers=full_server.headers, timeout=30).status_code == 404


def test_a_function_call_response_conforms(full_server, chat_model):
    tool = {"type": "function", **TOOL["function"]}
    body = {
        "model": chat_model,
        "input": "Weather in Paris?",
        "tools": [tool],
        "tool_choice": "required",
        "max_output_tokens": 48,
    }
    validate("Response", _ok(_post(full_server, "/responses", json=body)).json())


def test_response_stream_events_conform(full_server, chat_model):
    body = {"model": chat_model, "input": "Hello", "max_output_tokens": 16, "stream": True}
    events = _stream_events(_post(full_server, "/responses", json=body), "ResponseStreamEvent")
    first = events[0]["response"]
    assert first.get("usage", "absent") != None  # noqa: E711 (absent, or a real usage)


def test_models_conform(full_server, chat_model):
    listed = _ok(httpx.get(f"{full_server.url}/v1/models", headers=full_server.headers)).json()
    validate("ListModelsResponse", listed)
    url = f"{full_server.url}/v1/models/{chat_model}"
    validate("Model", _ok(httpx.get(url, headers=full_server.headers)).json())


@pytest.mark.parametrize("fmt", ["float", "base64"])
def test_embedding_bodies_conform(full_server, embedding_path, fmt):
    body = {"model": model_name(embedding_path), "input": ["Hi", "there"], "encoding_format": fmt}
    answer = _ok(_post(full_server, "/embeddings", json=body)).json()
    if fmt == "float":
        validate("CreateEmbeddingResponse", answer)
    else:  # the document knows only float arrays (its erratum: test_schemathesis._errata)
        assert all(isinstance(d["embedding"], str) for d in answer["data"])
        validate("CreateEmbeddingResponse", {**answer, "data": []})


def test_speech_stream_events_conform(full_server, speech_paths):
    body = {
        "model": model_name(speech_paths["tts"]),
        "input": "Hello there.",
        "voice": "vivian",
        "stream_format": "sse",
    }
    events = _stream_events(
        _post(full_server, "/audio/speech", json=body), "CreateSpeechResponseStreamEvent"
    )
    assert events[-1]["type"] == "speech.audio.done"


@pytest.mark.parametrize(
    ("path", "fmt", "schema"),
    [
        ("/audio/transcriptions", "json", "CreateTranscriptionResponseJson"),
        ("/audio/transcriptions", "verbose_json", "CreateTranscriptionResponseVerboseJson"),
        ("/audio/translations", "json", "CreateTranslationResponseJson"),
        ("/audio/translations", "verbose_json", "CreateTranslationResponseVerboseJson"),
    ],
)
def test_transcription_bodies_conform(full_server, speech_paths, wav, path, fmt, schema):
    data = {"model": model_name(speech_paths["asr"]), "response_format": fmt}
    files = {"file": ("hello.wav", wav, "audio/wav")}
    body = _ok(_post(full_server, path, data=data, files=files)).json()
    validate(schema, body)
    if fmt == "verbose_json":
        assert body["segments"], "verbose_json has segments"


def test_transcription_stream_events_conform(full_server, speech_paths, wav):
    data = {"model": model_name(speech_paths["asr"]), "stream": "true"}
    files = {"file": ("hello.wav", wav, "audio/wav")}
    events = _stream_events(
        _post(full_server, "/audio/transcriptions", data=data, files=files),
        "CreateTranscriptionResponseStreamEvent",
    )
    assert events[-1]["type"] == "transcript.text.done"


@pytest.mark.parametrize(
    ("path", "kwargs", "status"),
    [
        ("/chat/completions", {"json": {"model": "nope", "messages": HELLO}}, 404),
        ("/chat/completions", {"json": {"messages": HELLO, "temperature": "hot"}}, 400),
        ("/completions", {"json": {"prompt": "x"}}, 400),
        ("/responses", {"json": {"input": 7}}, 400),
        ("/audio/speech", {"json": {"input": ""}}, 400),
        ("/audio/transcriptions", {"data": {"model": "whisper-1"}}, 400),
    ],
)
def test_error_bodies_conform(full_server, path, kwargs, status):
    response = _post(full_server, path, **kwargs)
    assert response.status_code == status, response.text
    validate("ErrorResponse", response.json())


def test_the_file_of_this_check_exists():
    # The document these tests read must be the vendored one, not a stand-in.
    from tests.support.openai_spec import SPEC_PATH, spec

    assert SPEC_PATH == Path(__file__).parents[1] / "data/openai-openapi/openapi.served.json"
    assert spec()["x-vendored"]["commit"]


def test_spoken_chat_completions_conform(full_server, chat_model):
    audio = {"modalities": ["text", "audio"], "audio": {"voice": "vivian", "format": "wav"}}
    body = {"model": chat_model, "messages": HELLO, "max_tokens": 12, **audio}
    reply = _ok(_post(full_server, "/chat/completions", json=body)).json()
    validate("CreateChatCompletionResponse", reply)
    assert reply["choices"][0]["message"]["audio"]["transcript"]
    streamed = {**body, "stream": True, "stream_options": {"include_usage": True},
                "audio": {"voice": "vivian", "format": "pcm16"}}  # fmt: skip
    events = _stream_events(
        _post(full_server, "/chat/completions", json=streamed), "CreateChatCompletionStreamResponse"
    )
    assert any(e["choices"] and "audio" in e["choices"][0]["delta"] for e in events)
