"""Streams never go silent: keepalives while the first batch is late (the admission queue, a
long prefill) and between batches, in each API's own form; the prompt's usage up front."""

from __future__ import annotations

import json

from protocol.messages import Delta, Usage
from tests.support.fake_engine import (
    FakeEngine,
    Sleep,
    accepted,
    failure,
    finish,
    make_client,
    text,
)

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True}
MESSAGES = {**CHAT, "max_tokens": 16}
KEEPALIVE = 0.05  # seconds; each Sleep below spans several intervals
SLOW = 0.3


def _post(engine: FakeEngine, path: str, body: dict, keepalive: float = KEEPALIVE):
    with make_client(engine, sse_keepalive=keepalive) as client:
        return client.post(path, json=body)


def _frames(response) -> list[str]:
    return [f for f in response.text.split("\n\n") if f]


def test_a_late_first_batch_starts_the_stream_with_comments_then_streams_normally():
    engine = FakeEngine([Sleep(SLOW), accepted(), text("Hel"), finish()])
    response = _post(engine, "/v1/chat/completions", CHAT)
    assert response.status_code == 200
    frames = _frames(response)
    first_data = next(i for i, f in enumerate(frames) if f.startswith("data: "))
    assert first_data >= 2 and all(f == ": keepalive" for f in frames[:first_data])
    data = [f for f in frames if f.startswith("data: ")]
    assert json.loads(data[1][6:])["choices"][0]["delta"] == {"content": "Hel"}
    assert data[-1] == "data: [DONE]"


def test_silence_between_batches_is_filled_with_comments():
    engine = FakeEngine([accepted(), text("a"), Sleep(SLOW), text("b"), finish()])
    frames = _frames(_post(engine, "/v1/chat/completions", CHAT))
    a = next(i for i, f in enumerate(frames) if '"content":"a"' in f)
    b = next(i for i, f in enumerate(frames) if '"content":"b"' in f)
    assert b - a >= 3 and all(f == ": keepalive" for f in frames[a + 1 : b])


def test_a_fast_stream_has_no_keepalives():
    frames = _frames(_post(FakeEngine(), "/v1/chat/completions", CHAT, keepalive=5.0))
    assert not [f for f in frames if f.startswith(":")]


def test_keepalive_zero_turns_them_off_and_a_late_error_stays_an_http_status():
    engine = FakeEngine([Sleep(SLOW), failure("bad_request", "prompt too long")])
    response = _post(engine, "/v1/chat/completions", CHAT, keepalive=0)
    assert response.status_code == 400


def test_an_error_after_keepalives_is_the_stream_error_event():
    engine = FakeEngine([Sleep(SLOW), failure("bad_request", "prompt too long")])
    response = _post(engine, "/v1/chat/completions", CHAT)
    assert response.status_code == 200
    data = [f for f in _frames(response) if f.startswith("data: ")]
    assert json.loads(data[0][6:])["error"]["message"] == "prompt too long"
    assert data[-1] == "data: [DONE]"


def test_anthropic_streams_ping_events_while_waiting_and_prefilling():
    engine = FakeEngine([Sleep(SLOW), accepted(), Sleep(SLOW), text("x"), finish()])
    frames = _frames(_post(engine, "/v1/messages", MESSAGES))
    kinds = [f.split("\n")[0].removeprefix("event: ") for f in frames]
    start = kinds.index("message_start")
    delta = kinds.index("content_block_delta")
    assert start >= 2 and set(kinds[:start]) == {"ping"}
    assert kinds[start + 1 : delta].count("ping") >= 3
    assert not any(f.startswith(":") for f in frames)


def test_anthropic_message_start_reports_the_prompt_usage_the_worker_sent_first():
    first = [Delta("r", usage=Usage(1200, 0, cached_tokens=1000))]
    engine = FakeEngine([first, text("x"), finish(prompt=1200)])
    frames = _frames(_post(engine, "/v1/messages", MESSAGES, keepalive=5.0))
    start = json.loads(
        next(f for f in frames if f.startswith("event: message_start")).split("data: ")[1]
    )
    usage = start["message"]["usage"]
    assert usage["input_tokens"] == 200 and usage["cache_read_input_tokens"] == 1000


def test_responses_and_completions_streams_keep_alive_with_comments():
    for path, body in (
        ("/v1/responses", {"model": "tiny", "input": "hi", "stream": True}),
        ("/v1/completions", {"model": "tiny", "prompt": "hi", "stream": True}),
    ):
        engine = FakeEngine([Sleep(SLOW), accepted(), text("x"), finish()])
        response = _post(engine, path, body)
        assert response.status_code == 200, path
        assert _frames(response)[0] == ": keepalive", path
