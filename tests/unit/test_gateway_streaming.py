"""Streaming and request life cycle over a fake engine: SSE framing, early and late errors,
admission refusals, client disconnects (streaming and not), the shared streamed response on
its own, and the openai SDK as a client."""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack

import openai
import pytest
from starlette.requests import Request

from gateway.app import create_app
from gateway.http import errors
from gateway.http.streaming import Ending, StreamedResponse, enter_one, open_stream
from gateway.workers.errors import EngineUnavailable, QueueFull
from protocol.inputs import ChatInputs, SamplingParams
from protocol.messages import Delta
from tests.support.fake_engine import (
    HANG,
    FakeEngine,
    accepted,
    config,
    failure,
    finish,
    make_client,
    text,
)

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def events(response) -> list:
    """The `data:` payloads of an SSE body, JSON-decoded except the final [DONE]."""
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = [f for f in response.text.split("\n\n") if f]
    assert all(f.startswith("data: ") for f in frames)
    return [f[6:] if f[6:] == "[DONE]" else json.loads(f[6:]) for f in frames]


def stream_chat(engine: FakeEngine, **fields):
    with make_client(engine) as client:
        return client.post("/v1/chat/completions", json={**CHAT, **fields})


# -- framing -------------------------------------------------------------------------------


def test_chat_stream_framing():
    got = events(stream_chat(FakeEngine([accepted(), text("Hel", "lo"), text("!"), finish()])))
    assert got[-1] == "[DONE]"
    chunks = got[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert [c["choices"][0]["delta"] for c in chunks] == [
        {"role": "assistant", "content": ""},
        {"content": "Hello"},  # one chunk per engine batch: its texts merged
        {"content": "!"},
        {},
    ]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, None, "stop"]
    assert all("usage" not in c for c in chunks)


def test_chat_stream_with_include_usage_ends_with_a_usage_chunk():
    got = events(stream_chat(FakeEngine(), stream_options={"include_usage": True}))
    *chunks, usage_chunk, done = got
    assert done == "[DONE]"
    assert all(c["usage"] is None for c in chunks)
    assert usage_chunk["choices"] == []
    usage = usage_chunk["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (5, 2, 7)


def test_length_finish_reason_is_streamed():
    got = events(stream_chat(FakeEngine([accepted(), text("a"), finish("length")])))
    assert got[-2]["choices"][0]["finish_reason"] == "length"


def test_completion_stream_framing():
    engine = FakeEngine([accepted(), text("once"), finish()])
    with make_client(engine) as client:
        body = {"model": "tiny", "prompt": "x", "stream": True}
        got = events(client.post("/v1/completions", json=body))
    assert got[-1] == "[DONE]"
    assert [c["object"] for c in got[:-1]] == ["text_completion"] * 2
    assert [c["choices"][0]["text"] for c in got[:-1]] == ["once", ""]
    assert got[-2]["choices"][0]["finish_reason"] == "stop"
    assert engine.last.stream is True


def test_batch_holding_text_and_terminal_streams_both():
    got = events(stream_chat(FakeEngine([accepted(), text("a") + finish()])))
    assert [c["choices"][0]["finish_reason"] for c in got[:-1]] == [None, None, "stop"]
    assert got[1]["choices"][0]["delta"] == {"content": "a"}


# -- errors before and after the stream started --------------------------------------------


def test_error_in_the_first_batch_is_an_http_status():
    response = stream_chat(FakeEngine([accepted() + failure("bad_request", "template failed")]))
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "template failed"


def test_queue_full_is_503_with_retry_after():
    engine = FakeEngine()
    engine.admission_error = QueueFull("64 waiting", 1.5)
    response = stream_chat(engine)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "2"
    assert response.json()["error"]["code"] == "queue_full"


def test_engine_unavailable_without_a_hint_is_503_without_retry_after():
    engine = FakeEngine()
    engine.admission_error = EngineUnavailable("the engine is failed: no model", None)
    with make_client(engine) as client:
        response = client.post("/v1/chat/completions", json={**CHAT, "stream": False})
    assert response.status_code == 503
    assert "retry-after" not in response.headers


def test_error_mid_stream_is_an_sse_error_event_then_done():
    response = stream_chat(FakeEngine([accepted(), text("a"), failure("internal", "kaput")]))
    assert response.status_code == 200
    got = events(response)
    message = f"kaput (request id {response.headers['x-request-id']})"
    assert got[-2] == {
        "error": {"message": message, "type": "server_error", "param": None, "code": "internal"}
    }
    assert got[-1] == "[DONE]"


def test_abort_mid_stream_is_an_sse_error_event():
    got = events(stream_chat(FakeEngine([accepted(), text("a"), finish("abort")])))
    assert got[-2]["error"]["code"] == "aborted"
    assert got[-1] == "[DONE]"


def test_exception_mid_stream_is_an_sse_error_event():
    got = events(stream_chat(FakeEngine([accepted(), text("a"), RuntimeError("bug")])))
    assert got[-2]["error"]["type"] == "server_error"
    assert got[-1] == "[DONE]"


# -- client disconnect ---------------------------------------------------------------------


async def call_until_disconnect(app, path: str, body: dict, engine: FakeEngine) -> list[dict]:
    """Drive the ASGI app directly; the client disconnects once the fake engine hangs."""
    sent: list[dict] = []
    delivered = False

    async def receive() -> dict:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}
        while not (engine.requests and engine.last.served.is_set()):
            await asyncio.sleep(0.01)
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }
    await asyncio.wait_for(app(scope, receive, send), timeout=10)
    return sent


def test_disconnect_during_a_non_stream_request_aborts_it():
    engine = FakeEngine([accepted(), text("a"), HANG])
    app = create_app(config(), engine)
    asyncio.run(
        call_until_disconnect(app, "/v1/chat/completions", {**CHAT, "stream": False}, engine)
    )
    assert engine.last.exited.is_set()
    assert engine.last.aborted


def test_disconnect_during_a_stream_aborts_it():
    engine = FakeEngine([accepted(), text("a"), HANG])
    app = create_app(config(), engine)
    sent = asyncio.run(call_until_disconnect(app, "/v1/chat/completions", CHAT, engine))
    assert engine.last.exited.is_set()
    assert engine.last.aborted
    assert sent[0]["status"] == 200
    body = b"".join(m.get("body", b"") for m in sent[1:])
    assert b'"content":"a"' in body
    assert b"[DONE]" not in body


def test_a_stream_sends_one_body_message_per_engine_batch():
    engine = FakeEngine([accepted(), text("a", "b"), text("c"), finish()])
    app = create_app(config(), engine)
    sent = asyncio.run(call_until_disconnect(app, "/v1/chat/completions", CHAT, engine))
    bodies = [m["body"] for m in sent if m["type"] == "http.response.body" and m["body"]]
    assert len(bodies) == 4  # role chunk, "ab", "c", finish + [DONE]
    assert not engine.last.aborted


# -- the shared response (gateway/http/streaming.py) on its own --------------------------------


def run_response(batches: list, error) -> tuple[list[dict], FakeEngine]:
    """Stream `batches` (after an accepted one) through a StreamedResponse over a fake request;
    the encoder writes each delta's text and ends at the terminal delta."""
    engine = FakeEngine([accepted(), *batches])

    def encode(batch: list[Delta]) -> tuple[list[bytes], Ending]:
        writes = [d.text.encode() for d in batch]
        terminal = next((d for d in batch if d.finish_reason is not None), None)
        ending = False if terminal is None else errors.terminal_error(terminal) or True
        return writes, ending

    async def scenario() -> list[dict]:
        sent: list[dict] = []

        async def send(message: dict) -> None:
            sent.append(message)

        async def enter(stack: AsyncExitStack) -> tuple:
            inputs = ChatInputs([], SamplingParams(max_tokens=1))
            return await enter_one(engine, inputs, stack, "thing")

        opened = await open_stream(Request({"type": "http"}, never_disconnects), enter)
        await StreamedResponse(opened, encode, error, "thing")({}, never_disconnects, send)
        return sent

    return asyncio.run(asyncio.wait_for(scenario(), 10)), engine


async def never_disconnects() -> dict:
    await asyncio.Event().wait()
    return {}


def test_a_streamed_response_writes_each_batch_then_ends():
    sent, engine = run_response([text("a"), text("b"), finish()], None)
    assert [m.get("body") for m in sent[1:]] == [b"a", b"b", b""]
    assert sent[-1]["more_body"] is False and not engine.last.aborted


def test_an_exception_mid_stream_becomes_the_error_event_and_aborts_the_request():
    sent, engine = run_response([text("a"), RuntimeError("bug")], lambda e: e.code.encode())
    assert [m.get("body") for m in sent[1:]] == [b"a", b"internal", b""]
    assert engine.last.aborted


def test_without_an_error_event_a_failure_drops_the_connection_before_its_end():
    sent, _ = run_response([text("a"), failure()], None)
    assert [m.get("body") for m in sent[1:]] == [b"a"]
    assert all(m.get("more_body", True) for m in sent)  # a truncated transfer


def test_deltas_that_stop_without_a_terminal_one_are_an_error_event():
    sent, engine = run_response([text("a")], lambda e: e.message.encode())
    assert sent[-2]["body"] == b"The thing ended without a result"
    assert engine.last.aborted


# -- the openai SDK as the client ----------------------------------------------------------


@pytest.fixture
def sdk_client():
    def build(engine: FakeEngine) -> openai.OpenAI:
        http = make_client(engine)
        return openai.OpenAI(
            base_url="http://testserver/v1", api_key="k", http_client=http, max_retries=0
        )

    return build


def test_openai_sdk_reads_a_chat_completion(sdk_client):
    completion = sdk_client(FakeEngine()).chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hi"}], temperature=0
    )
    assert completion.choices[0].message.content == "Hello"
    assert completion.usage.total_tokens == 7


def test_openai_sdk_reads_a_chat_stream_with_usage(sdk_client):
    stream = sdk_client(FakeEngine()).chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello"
    assert chunks[-1].usage.completion_tokens == 2


def test_openai_sdk_raises_on_a_mid_stream_error(sdk_client):
    client = sdk_client(FakeEngine([accepted(), text("a"), failure("internal", "kaput")]))
    stream = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    with pytest.raises(openai.APIError, match="kaput"):
        list(stream)


def test_openai_sdk_sends_extra_body_extensions(sdk_client):
    engine = FakeEngine()
    sdk_client(engine).chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "hi"}],
        extra_body={"top_k": 20, "chat_template_kwargs": {"enable_thinking": False}},
    )
    assert engine.last.sampling.top_k == 20
    assert engine.last.inputs.chat_template_kwargs == {"enable_thinking": False}
