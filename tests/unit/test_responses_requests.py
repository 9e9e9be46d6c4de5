"""Parsing of Responses API bodies: input items, instructions, previous_response_id, tools,
text.format, reasoning, logprobs, the store, and 400s naming what cannot be served."""

from __future__ import annotations

import pytest

from gateway.api.responses.requests import parse_create
from gateway.api.responses.store import ResponseStore, StoredResponse
from gateway.http.errors import APIError
from gateway.mcp_rounds.items import UNANSWERED
from protocol.inputs import JsonSchema

TOOL = {"type": "function", "name": "weather", "parameters": {"type": "object"}, "strict": True}


def parse(responses: ResponseStore | None = None, **fields):
    body = {"model": "tiny", "input": "hi", **fields}
    return parse_create(body, responses or ResponseStore(), 50)


def messages(**fields) -> list[dict]:
    return parse(**fields).generation.inputs.messages


def rejected(**fields) -> APIError:
    with pytest.raises(APIError) as info:
        parse(**fields)
    assert info.value.status == 400
    return info.value


def test_string_input_and_instructions():
    assert messages(instructions="be brief") == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]


def test_items_of_one_assistant_turn_become_one_message():
    items = [
        {"role": "developer", "content": "rules"},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "weather?"}],
        },
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": "look"}],
        },
        {
            "type": "message",
            "role": "assistant",
            "id": "m1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "weather",
            "arguments": "{}",
            "id": "fc_1",
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    ]
    assert messages(input=items) == [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "reasoning_content": "look",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
    ]


def test_previous_response_id_prepends_the_stored_conversation_without_old_instructions():
    store = ResponseStore()
    history = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    store.put("resp_1", StoredResponse({}, history))
    got = parse(store, previous_response_id="resp_1", instructions="new", input="c")
    assert got.generation.inputs.messages == [
        {"role": "system", "content": "new"},
        *history,
        {"role": "user", "content": "c"},
    ]
    assert got.conversation == [*history, {"role": "user", "content": "c"}]


def test_an_approval_request_left_unanswered_gets_a_result_saying_the_call_did_not_run():
    call = {"id": "call_1", "type": "function", "function": {"name": "llm_time", "arguments": "{}"}}
    asked = {"role": "assistant", "content": "", "tool_calls": [call]}
    history = [{"role": "user", "content": "a"}, asked]
    output = [{"type": "mcp_approval_request", "id": "mcpr_call_1", "server_label": "tools"}]
    store = ResponseStore()
    store.put("resp_1", StoredResponse({"output": output}, history))
    mcp = {"type": "mcp", "server_label": "tools"}
    got = parse(store, previous_response_id="resp_1", input="c", tools=[mcp])
    assert got.generation.inputs.messages == [
        *history,
        {"role": "tool", "tool_call_id": "call_1", "content": UNANSWERED},
        {"role": "user", "content": "c"},
    ]
    assert got.conversation == got.generation.inputs.messages  # what the response stores
    # answered, the approval's own result stands there instead
    answer = {
        "type": "mcp_approval_response",
        "approval_request_id": "mcpr_call_1",
        "approve": False,
    }
    answered = parse(store, previous_response_id="resp_1", input=[answer], tools=[mcp])
    assert UNANSWERED not in str(answered.generation.inputs.messages)


def test_unknown_previous_response_id_is_rejected():
    assert rejected(previous_response_id="resp_gone").param == "previous_response_id"


def test_store_false_is_read():
    assert parse(store=False).store is False
    assert parse().store is True


def test_function_tools_and_choice_reach_the_worker():
    got = parse(tools=[TOOL], tool_choice={"type": "function", "name": "weather"}).generation.inputs
    assert got.tools[0]["function"]["name"] == "weather"
    assert got.tool_choice == {"type": "function", "function": {"name": "weather"}}


def test_a_deferred_function_is_checked_left_out_and_echoed():
    deferred = {**TOOL, "name": "later", "defer_loading": True}
    parsed = parse(tools=[deferred, TOOL])
    assert [t["function"]["name"] for t in parsed.generation.inputs.tools] == ["weather"]
    assert parsed.echo["tools"][0]["defer_loading"] is True
    error = rejected(tools=[deferred, TOOL], tool_choice={"type": "function", "name": "later"})
    assert "deferred" in error.message
    assert "tools[0].defer_loading" in rejected(tools=[{**deferred, "defer_loading": "y"}]).message


def test_tools_are_echoed_with_every_field_the_function_tool_schema_requires():
    bare = {"type": "function", "name": "weather"}
    assert parse(tools=[bare]).echo["tools"] == [
        {"type": "function", "name": "weather", "description": None, "parameters": None,
         "strict": None}
    ]  # fmt: skip


def test_user_is_echoed_only_when_given():
    assert "user" not in parse().echo
    assert parse(user="u-1").echo["user"] == "u-1"


def test_json_schema_text_format_becomes_a_constraint():
    fmt = {"type": "json_schema", "name": "N", "schema": {"type": "object"}, "strict": True}
    constraint = parse(text={"format": fmt}).generation.sampling.constraint
    assert constraint == JsonSchema({"type": "object"}, "N", True, "text.format.schema")


def test_max_output_tokens_and_sampling():
    s = parse(max_output_tokens=7, temperature=0.5, top_p=0.5).generation.sampling
    assert (s.max_tokens, s.temperature, s.top_p) == (7, 0.5, 0.5)
    assert parse().generation.sampling.max_tokens == 50


@pytest.mark.parametrize("effort, thinking", [("none", False), ("high", True)])
def test_reasoning_effort_switches_thinking(effort, thinking):
    kwargs = parse(reasoning={"effort": effort, "summary": "auto"}).generation.inputs
    kwargs = kwargs.chat_template_kwargs
    assert kwargs == {"enable_thinking": thinking, "reasoning_effort": effort}


def test_logprobs_include_turns_logprobs_on():
    got = parse(include=["message.output_text.logprobs"], top_logprobs=2)
    assert (got.logprobs, got.generation.sampling.logprobs) == (True, 2)
    assert parse().generation.sampling.logprobs is None


@pytest.mark.parametrize(
    "fields, param",
    [
        (
            {
                "input": [
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_image", "image_url": "u"}],
                    }
                ]
            },
            "input[0].content[0].type",
        ),
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type"),
        ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"tool_choice": {"type": "file_search"}}, "tool_choice"),
        ({"background": True}, "background"),
        ({"truncation": "auto"}, "truncation"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"text": {"format": {"type": "json_object"}}, "tools": [TOOL]}, "text.format"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"client_metadata": {"thread_id": 7}}, "client_metadata"),
    ],
)
def test_what_cannot_be_served_is_a_400_naming_it(fields, param):
    assert rejected(**fields).param == param


def test_codex_clis_client_metadata_is_accepted():
    metadata = {"thread_id": "t", "turn_id": "u", "x-codex-turn-metadata": '{"a": 1}'}
    assert parse(client_metadata=metadata).generation.inputs.messages


def test_the_store_evicts_the_least_recently_used():
    store = ResponseStore(capacity=2)
    for name in ("a", "b"):
        store.put(name, StoredResponse({}, []))
    store.get("a")
    store.put("c", StoredResponse({}, []))
    assert (store.get("a") is not None, store.get("b"), store.get("c") is not None) == (
        True,
        None,
        True,
    )
