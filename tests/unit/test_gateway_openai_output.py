"""OpenAI responses over a fake engine that emits reasoning, tool-call pieces and logprobs:
message and chunk shapes, n choices, completions logprobs and echo, and the openai SDK's
own accumulation of the streams."""

from __future__ import annotations

import json

import pytest

from protocol.messages import Delta, TokenLogprob, ToolCallDelta, Usage
from tests.support.fake_engine import FakeEngine, accepted, finish, make_client, text
from tests.support.sdk_clients import openai_client

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}


def reasoning(*parts: str) -> list[Delta]:
    return [Delta("r", reasoning=p, token_ids=[1]) for p in parts]


def call(index: int, arguments: str, name: str | None = None, id: str | None = None) -> list:
    return [Delta("r", tool_calls=[ToolCallDelta(index, id, name, arguments)], token_ids=[1])]


def with_logprobs(token: str, logprob: float) -> list[Delta]:
    top = [[5, token, logprob], [6, "x", -3.0]]
    return [Delta("r", text=token, token_ids=[5], logprobs=[TokenLogprob(5, token, logprob, top)])]


TOOL_SCRIPT = [
    accepted(),
    reasoning("think", "ing"),
    call(0, '{"city"', name="weather", id="call_a"),
    call(0, ': "Paris"}'),
    finish("tool_calls", completion=4),
]


def events(response) -> list:
    frames = [f for f in response.text.split("\n\n") if f]
    return [f[6:] if f[6:] == "[DONE]" else json.loads(f[6:]) for f in frames]


def post(engine: FakeEngine, path: str = "/v1/chat/completions", **fields):
    with make_client(engine) as client:
        body = {**CHAT, **fields} if path.endswith("chat/completions") else fields
        return client.post(path, json=body)


# -- chat, not streamed ----------------------------------------------------------------------


def test_tool_calls_and_reasoning_fill_the_message():
    body = post(FakeEngine(TOOL_SCRIPT)).json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "reasoning_content": "thinking",
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }


def test_a_tool_call_without_an_id_gets_one():
    script = [accepted(), call(0, "{}", name="now"), finish("tool_calls")]
    message = post(FakeEngine(script)).json()["choices"][0]["message"]
    assert message["tool_calls"][0]["id"].startswith("call_")


def test_a_stop_with_tool_calls_reports_tool_calls():
    script = [accepted(), call(0, "{}", name="now", id="c"), finish("stop")]
    assert post(FakeEngine(script)).json()["choices"][0]["finish_reason"] == "tool_calls"


def test_chat_logprobs_are_in_openai_shape():
    script = [accepted(), with_logprobs("Hi", -0.5), finish()]
    logprobs = post(FakeEngine(script), logprobs=True, top_logprobs=2).json()["choices"][0][
        "logprobs"
    ]
    assert logprobs["content"] == [
        {
            "token": "Hi",
            "logprob": -0.5,
            "bytes": [72, 105],
            "top_logprobs": [
                {"token": "Hi", "logprob": -0.5, "bytes": [72, 105]},
                {"token": "x", "logprob": -3.0, "bytes": [120]},
            ],
        }
    ]


def test_n_choices_are_separate_requests_with_their_indexes_and_summed_usage():
    engine = FakeEngine([accepted(), text("a"), finish(prompt=5, completion=2)])
    body = post(engine, n=3, seed=1).json()
    assert [c["index"] for c in body["choices"]] == [0, 1, 2]
    assert [c["message"]["content"] for c in body["choices"]] == ["a", "a", "a"]
    assert [r.sampling.seed for r in engine.requests] == [1, 2, 3]
    assert (body["usage"]["prompt_tokens"], body["usage"]["completion_tokens"]) == (5, 6)


def test_usage_reports_cached_and_reasoning_tokens():
    script = [accepted(), text("a"), [Delta("r", finish_reason="stop", usage=Usage(9, 4, 3, 2))]]
    usage = post(FakeEngine(script)).json()["usage"]
    assert usage["prompt_tokens_details"] == {"cached_tokens": 3}
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 2}


# -- chat, streamed --------------------------------------------------------------------------


def test_streamed_tool_calls_are_tool_call_deltas_never_content():
    chunks = events(post(FakeEngine(TOOL_SCRIPT), stream=True))[:-1]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[1] == {"reasoning_content": "thinking"}
    assert deltas[2] == {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_a",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city"'},
            }
        ]
    }
    assert deltas[3] == {"tool_calls": [{"index": 0, "function": {"arguments": ': "Paris"}'}}]}
    assert not any(d.get("content") for d in deltas)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_streamed_argument_pieces_arrive_incrementally():
    script = [accepted(), call(0, "", name="f", id="c"), call(0, '{"a":'), call(0, " 1}"), finish()]
    deltas = [c["choices"][0]["delta"] for c in events(post(FakeEngine(script), stream=True))[:-1]]
    pieces = [d["tool_calls"][0]["function"]["arguments"] for d in deltas if "tool_calls" in d]
    assert pieces == ["", '{"a":', " 1}"]


def test_streamed_logprobs_ride_on_their_chunk():
    script = [accepted(), with_logprobs("Hi", -0.5), finish()]
    chunks = events(post(FakeEngine(script), stream=True, logprobs=True))[:-1]
    assert chunks[1]["choices"][0]["logprobs"]["content"][0]["token"] == "Hi"


def test_streamed_n_choices_carry_their_indexes_and_one_usage_chunk():
    engine = FakeEngine([accepted(), text("a"), finish()])
    got = events(post(engine, n=2, stream=True, stream_options={"include_usage": True}))
    chunks = got[:-2]
    assert got[-1] == "[DONE]"
    assert got[-2]["usage"]["completion_tokens"] == 4
    assert sorted(c["choices"][0]["index"] for c in chunks) == [0, 0, 0, 1, 1, 1]
    finishes = [
        c["choices"][0]["finish_reason"] for c in chunks if c["choices"][0]["finish_reason"]
    ]
    assert finishes == ["stop", "stop"]


def test_openai_sdk_accumulates_a_streamed_tool_call():
    client = openai_client(FakeEngine(TOOL_SCRIPT))
    with client.chat.completions.stream(model="tiny", messages=CHAT["messages"]) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, call.function.arguments) == (
        "call_a",
        "weather",
        '{"city": "Paris"}',
    )
    assert final.choices[0].finish_reason == "tool_calls"


# -- completions -----------------------------------------------------------------------------


def test_completion_logprobs_are_in_legacy_shape():
    script = [accepted(), with_logprobs("ab", -0.5), with_logprobs("c", -1.0), finish()]
    body = post(FakeEngine(script), "/v1/completions", model="tiny", prompt="x", logprobs=1).json()
    assert body["choices"][0]["logprobs"] == {
        "tokens": ["ab", "c"],
        "token_logprobs": [-0.5, -1.0],
        "top_logprobs": [{"ab": -0.5, "x": -3.0}, {"c": -1.0, "x": -3.0}],
        "text_offset": [0, 2],
    }


def test_a_masked_token_logprob_of_minus_infinity_is_written_as_minus_9999():
    masked = [Delta("r", text="a", token_ids=[5],
                    logprobs=[TokenLogprob(5, "a", 0.0, [[5, "a", 0.0], [6, "b", float("-inf")]])])]  # fmt: skip
    chat = post(FakeEngine([accepted(), masked, finish()]), logprobs=True, top_logprobs=2)
    assert chat.status_code == 200
    tops = chat.json()["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    assert [top["logprob"] for top in tops] == [0.0, -9999.0]
    completion = post(FakeEngine([accepted(), masked, finish()]), "/v1/completions",
                      model="tiny", prompt="x", logprobs=2)  # fmt: skip
    assert completion.json()["choices"][0]["logprobs"]["top_logprobs"] == [{"a": 0.0, "b": -9999.0}]


def test_completion_echo_prepends_the_prompt():
    body = post(FakeEngine(), "/v1/completions", model="tiny", prompt="Say: ", echo=True).json()
    assert body["choices"][0]["text"] == "Say: Hello"


def test_streamed_completion_echo_comes_first():
    engine = FakeEngine()
    chunks = events(
        post(engine, "/v1/completions", model="tiny", prompt="P ", echo=True, stream=True)
    )
    assert [c["choices"][0]["text"] for c in chunks[:-1]] == ["P ", "Hello", ""]


@pytest.mark.parametrize("stream", [False, True])
def test_completion_n_choices(stream):
    engine = FakeEngine([accepted(), text("z"), finish()])
    response = post(engine, "/v1/completions", model="tiny", prompt="x", n=2, stream=stream)
    if stream:
        texts = {(c["choices"][0]["index"], c["choices"][0]["text"]) for c in events(response)[:-1]}
        assert {(0, "z"), (1, "z")} <= texts
    else:
        assert [c["text"] for c in response.json()["choices"]] == ["z", "z"]
    assert len(engine.requests) == 2
