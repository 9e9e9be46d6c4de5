"""The Responses API over a fake engine, with the official openai SDK as client: output items,
the streaming event sequence (parsed by the SDK), previous_response_id through the store,
GET / DELETE, store: false, incomplete and failed responses."""

from __future__ import annotations

import json

import openai
import pytest

from protocol.messages import Delta, TokenLogprob, ToolCallDelta, Usage
from tests.support.fake_engine import FakeEngine, accepted, failure, finish, make_client, text
from tests.support.sdk_clients import openai_client

TOOL = {"type": "function", "name": "weather", "parameters": {"type": "object"}, "strict": False}
SCRIPT = [
    accepted(),
    [Delta("r", reasoning="hmm", token_ids=[1])],
    text("Checking."),
    [Delta("r", tool_calls=[ToolCallDelta(0, "call_1", "weather", '{"city":')], token_ids=[1])],
    [Delta("r", tool_calls=[ToolCallDelta(0, None, None, ' "Paris"}')], token_ids=[1])],
    [Delta("r", finish_reason="tool_calls", usage=Usage(10, 5, 2, 1))],
]


def test_response_holds_reasoning_message_and_function_call_items():
    response = openai_client(FakeEngine(SCRIPT)).responses.create(model="tiny", input="weather?")
    assert response.status == "completed"
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    assert response.output[0].content[0].text == "hmm"
    assert response.output_text == "Checking."
    call = response.output[2]
    assert (call.call_id, call.name, call.arguments) == ("call_1", "weather", '{"city": "Paris"}')
    assert (response.usage.input_tokens, response.usage.output_tokens) == (10, 5)
    assert response.usage.input_tokens_details.cached_tokens == 2
    assert response.usage.output_tokens_details.reasoning_tokens == 1


def test_max_output_tokens_reached_is_an_incomplete_response():
    engine = FakeEngine([accepted(), text("a"), finish("length")])
    response = openai_client(engine).responses.create(model="tiny", input="x", max_output_tokens=1)
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"


def test_stream_event_sequence():
    client = openai_client(FakeEngine(SCRIPT))
    events = list(client.responses.create(model="tiny", input="weather?", stream=True))
    assert [e.type for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert [e.output_index for e in events if e.type == "response.output_item.added"] == [0, 1, 2]
    done = events[-1].response
    assert [item.type for item in done.output] == ["reasoning", "message", "function_call"]
    assert done.output[2].arguments == '{"city": "Paris"}'


def test_sdk_stream_helper_accumulates_the_final_response():
    client = openai_client(FakeEngine(SCRIPT))
    with client.responses.stream(model="tiny", input="weather?", tools=[TOOL]) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert deltas == ["Checking."]
    assert final.output_text == "Checking."
    assert final.output[2].arguments == '{"city": "Paris"}'


def test_previous_response_id_continues_the_conversation():
    engine = FakeEngine(SCRIPT)
    client = openai_client(engine)
    first = client.responses.create(model="tiny", input="weather?", tools=[TOOL])
    engine.script = [accepted(), text("Sunny."), finish()]
    second = client.responses.create(
        model="tiny",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": "call_1", "output": "sunny"}],
        tools=[TOOL],
    )
    assert second.output_text == "Sunny."
    assert second.previous_response_id == first.id
    sent = engine.last.inputs.messages
    assert sent[0] == {"role": "user", "content": "weather?"}
    assert sent[1]["tool_calls"][0]["id"] == "call_1"
    assert sent[1]["reasoning_content"] == "hmm"
    assert sent[2] == {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}


def test_streamed_responses_are_stored_too():
    engine = FakeEngine([accepted(), text("a"), finish()])
    client = openai_client(engine)
    events = list(client.responses.create(model="tiny", input="x", stream=True))
    response_id = events[-1].response.id
    assert client.responses.retrieve(response_id).output_text == "a"


def test_store_false_is_not_retrievable():
    client = openai_client(FakeEngine())
    response = client.responses.create(model="tiny", input="x", store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)


def test_delete_removes_a_stored_response():
    client = openai_client(FakeEngine())
    response = client.responses.create(model="tiny", input="x")
    client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)


def test_output_text_logprobs_when_included():
    script = [
        accepted(),
        [
            Delta(
                "r",
                text="Hi",
                token_ids=[5],
                logprobs=[TokenLogprob(5, "Hi", -0.25, [[5, "Hi", -0.25]])],
            )
        ],
        finish(),
    ]
    response = openai_client(FakeEngine(script)).responses.create(
        model="tiny", input="x", include=["message.output_text.logprobs"], top_logprobs=1
    )
    (logprob,) = response.output[0].content[0].logprobs
    assert (logprob.token, logprob.logprob, logprob.top_logprobs[0].token) == ("Hi", -0.25, "Hi")


def test_a_failure_mid_stream_is_an_error_event_then_response_failed():
    engine = FakeEngine([accepted(), text("a"), failure("internal", "kaput")])
    with make_client(engine) as client:
        body = client.post(
            "/v1/responses", json={"model": "tiny", "input": "x", "stream": True}
        ).text
    frames = [f.split("\n") for f in body.split("\n\n") if f]
    names = [f[0].removeprefix("event: ") for f in frames]
    assert names[-2:] == ["error", "response.failed"]
    error = json.loads(frames[-2][1].removeprefix("data: "))
    assert (error["message"], error["code"]) == ("kaput", "internal")
    failed = json.loads(frames[-1][1].removeprefix("data: "))["response"]
    assert (failed["status"], failed["error"]["message"]) == ("failed", "kaput")


def test_errors_before_the_stream_are_openai_shaped():
    with make_client(FakeEngine()) as client:
        response = client.post("/v1/responses", json={"model": "tiny", "input": 3})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "input"
