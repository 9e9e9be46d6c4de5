"""The Anthropic Messages API over a fake engine: Message objects, the streaming event
sequence, Anthropic-shaped errors, count_tokens, and the official anthropic SDK as client
(create, messages.stream(), a tool-use loop)."""

from __future__ import annotations

import json

import anthropic
import pytest

from gateway.workers.errors import EngineUnavailable, WorkerRejected
from protocol.messages import Delta, ToolCallDelta, Usage
from tests.support.fake_engine import FakeEngine, accepted, failure, finish, make_client, text
from tests.support.sdk_clients import anthropic_client

USER = [{"role": "user", "content": "weather in Paris?"}]
BODY = {"model": "tiny", "max_tokens": 20, "messages": USER}
TOOL = {
    "name": "weather",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
SCRIPT = [
    accepted(),
    [Delta("r", reasoning="need ", token_ids=[1])],
    [Delta("r", reasoning="data", token_ids=[1])],
    text("Checking."),
    [Delta("r", tool_calls=[ToolCallDelta(0, "toolu_1", "weather", '{"city"')], token_ids=[1])],
    [Delta("r", tool_calls=[ToolCallDelta(0, None, None, ': "Paris"}')], token_ids=[1])],
    [Delta("r", finish_reason="tool_calls", usage=Usage(12, 6, cached_tokens=4))],
]


def sse(response) -> list[tuple[str, dict]]:
    """(event name, data) pairs of an SSE body."""
    out = []
    for frame in filter(None, response.text.split("\n\n")):
        lines = dict(line.split(": ", 1) for line in frame.split("\n"))
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def post(engine, path: str = "/v1/messages", **fields):
    with make_client(engine) as client:
        return client.post(path, json={**BODY, **fields})


def test_message_holds_thinking_text_and_tool_use_blocks():
    body = post(FakeEngine(SCRIPT)).json()
    assert body["type"] == "message" and body["role"] == "assistant"
    assert body["id"].startswith("msg_")
    assert body["content"] == [
        {"type": "thinking", "thinking": "need data", "signature": ""},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
    ]
    assert (body["stop_reason"], body["stop_sequence"]) == ("tool_use", None)
    assert body["usage"] == {
        "input_tokens": 8,
        "output_tokens": 6,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 4,
    }


@pytest.mark.parametrize("reason, expected", [("stop", "end_turn"), ("length", "max_tokens")])
def test_stop_reasons(reason, expected):
    engine = FakeEngine([accepted(), text("a"), finish(reason)])
    assert post(engine).json()["stop_reason"] == expected


def stopped_by(sequence: str) -> list[Delta]:
    return [Delta("r", finish_reason="stop", usage=Usage(5, 1), stop_sequence=sequence)]


def test_a_stop_sequence_is_reported_with_the_string_that_matched():
    body = post(FakeEngine([accepted(), text("a"), stopped_by("END")])).json()
    assert (body["stop_reason"], body["stop_sequence"]) == ("stop_sequence", "END")


def test_a_streamed_stop_sequence_is_reported_in_message_delta():
    got = sse(post(FakeEngine([accepted(), text("a"), stopped_by("END")]), stream=True))
    (delta,) = [data["delta"] for name, data in got if name == "message_delta"]
    assert delta == {"stop_reason": "stop_sequence", "stop_sequence": "END"}


def test_omitted_thinking_keeps_the_block_but_not_its_text():
    body = post(FakeEngine(SCRIPT), thinking={"type": "adaptive", "display": "omitted"}).json()
    assert body["content"][0] == {"type": "thinking", "thinking": "", "signature": ""}


def test_stream_follows_the_anthropic_event_sequence():
    got = sse(post(FakeEngine(SCRIPT), stream=True))
    names = [name for name, _ in got]
    assert names == [
        "message_start",
        "ping",
        "content_block_start",  # 0 thinking
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",  # signature_delta
        "content_block_stop",
        "content_block_start",  # 1 text
        "content_block_delta",
        "content_block_stop",
        "content_block_start",  # 2 tool_use
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(data["type"] == name for name, data in got)
    starts = [data for name, data in got if name == "content_block_start"]
    assert [(s["index"], s["content_block"]["type"]) for s in starts] == [
        (0, "thinking"),
        (1, "text"),
        (2, "tool_use"),
    ]
    deltas = [data["delta"] for name, data in got if name == "content_block_delta"]
    assert [d["type"] for d in deltas] == [
        "thinking_delta",
        "thinking_delta",
        "signature_delta",
        "text_delta",
        "input_json_delta",
        "input_json_delta",
    ]
    message_delta = got[-2][1]
    assert message_delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert message_delta["usage"]["output_tokens"] == 6


def test_message_start_carries_the_prompt_usage_when_the_worker_reports_it_early():
    script = [[Delta("r", usage=Usage(12, 0, cached_tokens=4))], text("a"), finish()]
    start = sse(post(FakeEngine(script), stream=True))[0][1]
    assert start["message"]["usage"]["input_tokens"] == 8
    assert start["message"]["usage"]["cache_read_input_tokens"] == 4


def test_anthropic_sdk_stream_accumulates_the_final_message():
    client = anthropic_client(FakeEngine(SCRIPT))
    with client.messages.stream(model="tiny", max_tokens=20, messages=USER) as stream:
        assert "".join(stream.text_stream) == "Checking."
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use"]
    assert final.content[2].input == {"city": "Paris"}
    assert final.stop_reason == "tool_use"
    assert (final.usage.input_tokens, final.usage.cache_read_input_tokens) == (8, 4)


def test_anthropic_sdk_tool_use_loop():
    engine = FakeEngine(SCRIPT)
    client = anthropic_client(engine)
    messages = list(USER)
    reply = client.messages.create(model="tiny", max_tokens=20, messages=messages, tools=[TOOL])
    (use,) = [b for b in reply.content if b.type == "tool_use"]
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}],
        },
    ]
    engine.script = [accepted(), text("It is sunny."), finish()]
    final = client.messages.create(model="tiny", max_tokens=20, messages=messages, tools=[TOOL])
    assert final.content[0].text == "It is sunny."
    sent = engine.last.inputs.messages
    assert sent[1]["tool_calls"][0]["function"] == {
        "name": "weather",
        "arguments": '{"city": "Paris"}',
    }
    assert sent[2] == {"role": "tool", "content": "sunny", "tool_call_id": "toolu_1"}


def test_sdk_temperature_and_top_k_travel_in_the_body():
    engine = FakeEngine()
    anthropic_client(engine).messages.create(
        model="tiny", max_tokens=5, messages=USER, extra_body={"temperature": 0.0, "top_k": 3}
    )
    assert (engine.last.sampling.temperature, engine.last.sampling.top_k) == (0.0, 3)


# -- errors ----------------------------------------------------------------------------------


def test_validation_errors_are_anthropic_shaped():
    response = post(FakeEngine(), temperature=3)
    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert "temperature" in body["error"]["message"]


def test_unknown_model_is_an_anthropic_not_found_error():
    with pytest.raises(anthropic.NotFoundError) as info:
        anthropic_client(FakeEngine()).messages.create(
            model="claude-x", max_tokens=5, messages=USER
        )
    assert info.value.body["error"]["type"] == "not_found_error"


def test_missing_api_key_is_an_anthropic_authentication_error():
    client = anthropic_client(FakeEngine(), api_key="sekrit")
    with pytest.raises(anthropic.AuthenticationError) as info:
        client.messages.create(model="tiny", max_tokens=5, messages=USER)
    assert info.value.body["error"]["type"] == "authentication_error"


def test_engine_unavailable_is_an_overloaded_error():
    engine = FakeEngine()
    engine.admission_error = EngineUnavailable("busy", 1.0)
    response = post(engine)
    assert response.status_code == 503
    assert response.json()["error"]["type"] == "overloaded_error"


def test_a_failure_mid_stream_is_an_error_event_the_sdk_raises():
    engine = FakeEngine([accepted(), text("a"), failure("internal", "kaput")])
    response = post(engine, stream=True)
    got = sse(response)
    assert got[-1] == (
        "error",
        {
            "type": "error",
            "error": {"type": "api_error", "message": "kaput"},
            "request_id": response.headers["x-request-id"],
        },
    )
    with pytest.raises(anthropic.APIStatusError, match="kaput"):
        with anthropic_client(engine).messages.stream(
            model="tiny", max_tokens=5, messages=USER
        ) as s:
            s.get_final_message()


# -- count_tokens ----------------------------------------------------------------------------


def test_count_tokens_asks_the_engine_with_the_chat_inputs():
    engine = FakeEngine()
    engine.input_tokens = 17
    count = anthropic_client(engine).messages.count_tokens(
        model="tiny", messages=USER, system="be brief", tools=[TOOL]
    )
    assert count.input_tokens == 17
    (inputs,) = engine.counted
    assert inputs.messages[0] == {"role": "system", "content": "be brief"}
    assert inputs.tools[0]["function"]["name"] == "weather"


def test_count_tokens_of_input_the_worker_rejects_is_400():
    engine = FakeEngine()
    engine.count_error = WorkerRejected("the chat template rejected the messages")
    with make_client(engine) as client:
        response = client.post(
            "/v1/messages/count_tokens", json={"model": "tiny", "messages": USER}
        )
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "the chat template rejected the messages"
