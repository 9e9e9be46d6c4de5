"""Parsing of Anthropic Messages bodies: content blocks, tools, thinking, output_config, the
fields the anthropic SDK sends, and 400s naming what cannot be served."""

from __future__ import annotations

import pytest

from gateway.api.anthropic_messages.requests import parse_count, parse_create
from gateway.http.errors import APIError
from protocol.inputs import JsonSchema

USER = [{"role": "user", "content": "hi"}]
TOOL = {
    "name": "weather",
    "description": "Weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def create(**fields):
    return parse_create({"model": "tiny", "max_tokens": 10, "messages": USER, **fields})


def inputs(**fields):
    return create(**fields).generation.inputs


def rejected(**fields) -> APIError:
    with pytest.raises(APIError) as info:
        parse_create({"model": "tiny", "max_tokens": 10, "messages": USER, **fields})
    assert info.value.status == 400
    return info.value


def test_system_string_and_blocks_become_a_system_message():
    blocks = [
        {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "b"},
    ]
    assert inputs(system="be brief").messages[0] == {"role": "system", "content": "be brief"}
    assert inputs(system=blocks).messages[0] == {"role": "system", "content": "a\nb"}


ATTRIBUTION = "x-anthropic-billing-header: cc_version=2.1.332.1c9; cc_entrypoint=sdk-cli;"


def test_claude_codes_attribution_block_is_not_part_of_the_prompt():
    blocks = [
        {"type": "text", "text": ATTRIBUTION},
        {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
    ]
    expected = {"role": "system", "content": "You are Claude Code."}
    assert inputs(system=blocks).messages[0] == expected
    assert inputs(system=f"{ATTRIBUTION} cch=0aaa9;\nYou are Claude Code.").messages[0] == expected
    assert inputs(system=[{"type": "text", "text": ATTRIBUTION}]).messages == USER
    _, counted = parse_count({"model": "tiny", "messages": USER, "system": blocks})
    assert counted.messages[0] == expected


def test_an_attribution_line_ending_in_crlf_is_removed_with_its_line_break():
    text = f"{ATTRIBUTION} cch=0aaa9;\r\nYou are Claude Code."
    assert inputs(system=text).messages[0] == {"role": "system", "content": "You are Claude Code."}


@pytest.mark.parametrize(
    "text",
    [
        f"You are Claude Code.\n{ATTRIBUTION}",  # not first
        f" {ATTRIBUTION}",  # not at the very start
        f"{ATTRIBUTION}You are Claude Code.",  # blocks joined without a line break
        f"{ATTRIBUTION} You are Claude Code.",
        "x-anthropic-billing-header: is how Claude Code starts its prompt.",
    ],
)
def test_text_that_is_not_exactly_an_attribution_line_is_kept(text):
    assert inputs(system=text).messages[0] == {"role": "system", "content": text}


def test_sampling_fields_reach_sampling_params():
    s = create(temperature=0.2, top_p=0.9, top_k=5, stop_sequences=["END"]).generation.sampling
    assert (s.temperature, s.top_p, s.top_k, s.stop, s.max_tokens) == (0.2, 0.9, 5, ["END"], 10)


def test_max_tokens_is_required():
    with pytest.raises(APIError) as info:
        parse_create({"model": "tiny", "messages": USER})
    assert info.value.param == "max_tokens"


def test_tool_use_round_trip_becomes_tool_calls_and_tool_messages():
    messages = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "look it up", "signature": "sig"},
                {"type": "redacted_thinking", "data": "xx"},
                {"type": "text", "text": "Let me check."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": "no"}],
                    "is_error": True,
                },
                {"type": "text", "text": "thanks"},
            ],
        },
    ]
    got = parse_create({"model": "tiny", "max_tokens": 5, "messages": messages, "tools": [TOOL]})
    assert got.generation.inputs.messages == [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                }
            ],
            "reasoning_content": "look it up",
        },
        {"role": "tool", "content": "sunny", "tool_call_id": "toolu_1"},
        {"role": "tool", "content": "Error: no", "tool_call_id": "toolu_2"},
        {"role": "user", "content": "thanks"},
    ]


def test_tools_become_function_tools():
    (tool,) = inputs(tools=[{**TOOL, "cache_control": {"type": "ephemeral"}}]).tools
    assert tool == {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "Weather in a city",
            "parameters": TOOL["input_schema"],
        },
    }


def test_a_deferred_tool_is_checked_and_left_out():
    """`defer_loading: true` waits for a tool search, which no one runs here: the tool is not
    sent to the worker, naming it in tool_choice is a 400 saying so, and it still counts for
    duplicate names and its own checks."""
    deferred = {**TOOL, "name": "later", "defer_loading": True}
    assert [t["function"]["name"] for t in inputs(tools=[deferred, TOOL]).tools] == ["weather"]
    assert inputs(tools=[deferred]).tools == []
    error = rejected(tools=[deferred, TOOL], tool_choice={"type": "tool", "name": "later"})
    assert "deferred" in error.message and "later" in error.message
    assert "defined twice" in rejected(tools=[TOOL, {**TOOL, "defer_loading": True}]).message
    assert "tools[0].defer_loading" in rejected(tools=[{**deferred, "defer_loading": 1}]).message
    assert "tools[0].name" in rejected(tools=[{**deferred, "name": ""}]).message


@pytest.mark.parametrize(
    "choice, expected, parallel",
    [
        ({"type": "auto"}, "auto", None),
        ({"type": "any"}, "required", None),
        ({"type": "none"}, "none", None),
        (
            {"type": "tool", "name": "weather"},
            {"type": "function", "function": {"name": "weather"}},
            None,
        ),
        ({"type": "any", "disable_parallel_tool_use": True}, "required", False),
    ],
)
def test_tool_choice_maps_to_the_worker_choice(choice, expected, parallel):
    got = inputs(tools=[TOOL], tool_choice=choice)
    assert got.tool_choice == expected
    assert got.parallel_tool_calls == parallel


def test_enabled_thinking_sets_the_template_switch_and_the_budget():
    got = inputs(thinking={"type": "enabled", "budget_tokens": 5})
    assert got.chat_template_kwargs == {"enable_thinking": True}
    assert got.thinking_budget == 5


def test_disabled_thinking_turns_the_template_switch_off():
    assert inputs(thinking={"type": "disabled"}).chat_template_kwargs == {"enable_thinking": False}


def test_thinking_budget_must_be_below_max_tokens():
    assert (
        rejected(thinking={"type": "enabled", "budget_tokens": 10}).param
        == "thinking.budget_tokens"
    )


def test_omitted_thinking_display_is_remembered():
    assert create(thinking={"type": "adaptive", "display": "omitted"}).omit_thinking


def test_output_config_format_becomes_a_json_schema_constraint():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    got = create(
        output_config={"effort": "low", "format": {"type": "json_schema", "schema": schema}}
    )
    assert got.generation.sampling.constraint == JsonSchema(
        schema, field="output_config.format.schema"
    )


def test_output_config_effort_reaches_the_template_as_reasoning_effort():
    assert inputs(output_config={"effort": "high"}).chat_template_kwargs == {
        "reasoning_effort": "high"
    }
    own = {"chat_template_kwargs": {"reasoning_effort": "low"}}
    assert inputs(output_config={"effort": "high"}, **own).chat_template_kwargs == {
        "reasoning_effort": "low"
    }


def test_fields_the_sdk_sends_are_accepted():
    create(
        metadata={"user_id": "u"},
        service_tier="auto",
        cache_control={"type": "ephemeral"},
        inference_geo="us",
        speed="standard",
        diagnostics={"previous_message_id": "m"},
        container=None,
        stream=False,
    )


@pytest.mark.parametrize(
    "fields, param",
    [
        (
            {"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
            "messages[0].content[0].type",
        ),
        ({"messages": [*USER, {"role": "assistant", "content": "Sure"}]}, "messages[1]"),
        ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
        ({"tools": [{"name": "f"}]}, "tools[0].input_schema"),
        ({"tool_choice": {"type": "tool", "name": "missing"}, "tools": [TOOL]}, "tool_choice"),
        ({"tool_choice": {"type": "sometimes"}}, "tool_choice.type"),
        ({"temperature": 1.5}, "temperature"),
        ({"container": "c1"}, "container"),
        ({"thinking": {"type": "sometimes"}}, "thinking.type"),
        (
            {"output_config": {"format": {"type": "json_schema", "schema": {}}}, "tools": [TOOL]},
            "output_config.format",
        ),
        ({"mcp_servers": [{"type": "url", "url": "https://x", "name": "x"}]}, "mcp_servers"),
        ({"thread": {"id": "t"}}, "thread"),
        ({"compaction": {"type": "summarize"}}, "compaction"),
        (
            {"context_management": {"edits": [{"type": "compact_20260112"}]}},
            "context_management.edits[0].type",
        ),
    ],
)
def test_what_cannot_be_served_is_a_400_naming_it(fields, param):
    with pytest.raises(APIError) as info:
        parse_create({"model": "tiny", "max_tokens": 10, "messages": USER, **fields})
    assert info.value.status == 400
    assert info.value.param == param


def test_count_tokens_takes_prompt_fields_only():
    model, got = parse_count({"model": "tiny", "messages": USER, "system": "s", "tools": [TOOL]})
    assert model == "tiny"
    assert got.messages[0] == {"role": "system", "content": "s"}
    assert got.tools[0]["function"]["name"] == "weather"
    with pytest.raises(APIError) as info:
        parse_count({"model": "tiny", "messages": USER, "max_tokens": 5})
    assert info.value.param == "max_tokens"


def test_thinking_display_updates_is_served_as_summarized():
    from gateway.api.anthropic_messages.requests import parse_create

    body = {"model": "tiny", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    updates = parse_create({**body, "thinking": {"type": "adaptive", "display": "updates"}})
    summarized = parse_create({**body, "thinking": {"type": "adaptive", "display": "summarized"}})
    assert updates.omit_thinking is summarized.omit_thinking is False
    assert updates.generation.inputs == summarized.generation.inputs
