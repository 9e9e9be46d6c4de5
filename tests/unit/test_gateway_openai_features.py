"""Parsing of the OpenAI text-API features: tools, tool messages, reasoning, structured output,
logprobs, n, echo; each unsupported combination is a 400 naming a field."""

from __future__ import annotations

import pytest

from gateway.api.chat_completions.requests import parse_completion
from gateway.generation.chat_body import parse_chat
from gateway.http.errors import APIError
from protocol.inputs import JsonObject, JsonSchema

USER = [{"role": "user", "content": "hi"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def chat(**fields):
    return parse_chat({"model": "tiny", "messages": USER, **fields}, default_max_tokens=100)


def completion(**fields):
    return parse_completion({"model": "tiny", "prompt": "once", **fields}, default_max_tokens=100)


def rejected(parse, **fields) -> APIError:
    with pytest.raises(APIError) as info:
        parse(**fields)
    assert info.value.status == 400
    return info.value


# -- tools -------------------------------------------------------------------------------------


def test_function_tools_reach_the_worker_inputs():
    inputs = chat(tools=[WEATHER]).inputs
    assert inputs.tools == [WEATHER]
    assert inputs.tool_choice is None


def test_a_tool_without_parameters_gets_an_empty_object_schema():
    tool = {"type": "function", "function": {"name": "now"}}
    function = chat(tools=[tool]).inputs.tools[0]["function"]
    assert function == {"name": "now", "parameters": {"type": "object", "properties": {}}}


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
def test_tool_choice_strings_reach_the_worker(choice):
    assert chat(tools=[WEATHER], tool_choice=choice).inputs.tool_choice == choice


def test_named_tool_choice_reaches_the_worker():
    choice = {"type": "function", "function": {"name": "weather"}}
    assert chat(tools=[WEATHER], tool_choice=choice).inputs.tool_choice == choice


def test_parallel_tool_calls_reaches_the_worker():
    assert chat(tools=[WEATHER], parallel_tool_calls=False).inputs.parallel_tool_calls is False


def test_named_tool_choice_must_name_a_defined_tool():
    choice = {"type": "function", "function": {"name": "stocks"}}
    assert rejected(chat, tools=[WEATHER], tool_choice=choice).param == "tool_choice"


def test_required_tool_choice_needs_tools():
    assert rejected(chat, tool_choice="required").param == "tool_choice"


def test_duplicate_tool_names_are_rejected():
    assert rejected(chat, tools=[WEATHER, WEATHER]).param == "tools[1].name"


@pytest.mark.parametrize(
    "tools, param",
    [
        ([{"type": "custom", "custom": {"name": "g"}}], "tools[0].type"),
        ([{"type": "function", "function": {"name": ""}}], "tools[0].function.name"),
        (
            [{"type": "function", "function": {"name": "f", "parameters": []}}],
            "tools[0].function.parameters",
        ),
        ([{"type": "function", "function": {"name": "f", "bogus": 1}}], "tools[0].function.bogus"),
    ],
)
def test_malformed_or_unsupported_tools_are_rejected_naming_the_path(tools, param):
    assert rejected(chat, tools=tools).param == param


def test_allowed_tools_choice_is_not_supported():
    choice = {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}
    error = rejected(chat, tools=[WEATHER], tool_choice=choice)
    assert (error.param, error.code) == ("tool_choice", "unsupported_parameter")


# -- tool and assistant messages -------------------------------------------------------------


def test_tool_round_trip_messages_are_normalized():
    call = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call], "reasoning_content": "hm"},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "sunny"}]},
    ]
    got = parse_chat({"model": "tiny", "messages": messages}, 1).inputs.messages
    assert got == [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [call], "reasoning_content": "hm"},
        {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
    ]


def test_tool_call_arguments_given_as_an_object_become_json_text():
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
    messages = [*USER, {"role": "assistant", "tool_calls": [call]}]
    got = parse_chat({"model": "tiny", "messages": messages}, 1).inputs.messages[1]
    assert got["tool_calls"][0]["function"]["arguments"] == '{"a": 1}'


# -- reasoning -------------------------------------------------------------------------------


@pytest.mark.parametrize("effort, thinking", [("none", False), ("minimal", False), ("high", True)])
def test_reasoning_effort_switches_the_templates_thinking(effort, thinking):
    kwargs = chat(reasoning_effort=effort).inputs.chat_template_kwargs
    assert kwargs == {"enable_thinking": thinking, "reasoning_effort": effort}


def test_explicit_template_kwargs_win_over_reasoning_effort():
    kwargs = chat(
        reasoning_effort="high",
        chat_template_kwargs={"enable_thinking": False, "reasoning_effort": "low"},
    )
    assert kwargs.inputs.chat_template_kwargs == {
        "enable_thinking": False,
        "reasoning_effort": "low",
    }


def test_unknown_reasoning_effort_is_rejected():
    assert rejected(chat, reasoning_effort="extreme").param == "reasoning_effort"


# -- structured output -----------------------------------------------------------------------


def test_json_object_response_format_becomes_a_constraint():
    assert chat(response_format={"type": "json_object"}).sampling.constraint == JsonObject()


def test_json_schema_response_format_becomes_a_constraint():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "N", "schema": schema, "strict": True}}
    assert chat(response_format=fmt).sampling.constraint == JsonSchema(
        schema, "N", True, "response_format.json_schema.schema"
    )


def test_text_response_format_is_no_constraint():
    assert chat(response_format={"type": "text"}).sampling.constraint is None


@pytest.mark.parametrize(
    "fmt, param",
    [
        ({"type": "xml"}, "response_format.type"),
        ({"type": "json_schema"}, "response_format.json_schema"),
        (
            {"type": "json_schema", "json_schema": {"schema": 3}},
            "response_format.json_schema.schema",
        ),
        ({"type": "json_object", "extra": 1}, "response_format.extra"),
    ],
)
def test_malformed_response_formats_are_rejected_naming_the_path(fmt, param):
    assert rejected(chat, response_format=fmt).param == param


def test_json_response_format_with_callable_tools_is_an_unsupported_combination():
    error = rejected(chat, tools=[WEATHER], response_format={"type": "json_object"})
    assert (error.param, error.code) == ("response_format", "unsupported_parameter")


def test_json_response_format_with_tool_choice_none_is_accepted():
    req = chat(tools=[WEATHER], tool_choice="none", response_format={"type": "json_object"})
    assert req.sampling.constraint == JsonObject()


# -- logprobs, n, completions extras ---------------------------------------------------------


def test_chat_logprobs_default_to_no_alternatives():
    assert chat(logprobs=True).sampling.logprobs == 0


def test_chat_top_logprobs_set_the_alternatives():
    assert chat(logprobs=True, top_logprobs=5).sampling.logprobs == 5


def test_chat_logprobs_off_stay_none():
    assert chat(logprobs=False, top_logprobs=None).sampling.logprobs is None


def test_top_logprobs_without_logprobs_is_rejected():
    assert rejected(chat, top_logprobs=2).param == "top_logprobs"


def test_top_logprobs_above_twenty_is_rejected():
    assert rejected(chat, logprobs=True, top_logprobs=21).param == "top_logprobs"


def test_n_is_read_and_limited():
    assert chat(n=3).n == 3
    assert rejected(chat, n=17).param == "n"


def test_n_choices_get_consecutive_seeds():
    seeds = [c.sampling.seed for c in chat(n=3, seed=7).choices()]
    assert seeds == [7, 8, 9]


def test_n_choices_without_a_seed_stay_unseeded():
    assert [c.sampling.seed for c in chat(n=2).choices()] == [None, None]


def test_completion_logprobs_set_the_alternatives():
    assert completion(logprobs=3).sampling.logprobs == 3


def test_completion_echo_keeps_the_prompt_text():
    assert completion(echo=True).echo == "once"


def test_completion_echo_of_token_ids_is_not_supported():
    assert rejected(completion, echo=True, prompt=[1, 2]).param == "echo"


def test_completion_echo_with_logprobs_is_not_supported():
    assert rejected(completion, echo=True, logprobs=1).param == "echo"


def test_completion_best_of_must_equal_n():
    assert completion(n=2, best_of=2).n == 2
    assert rejected(completion, n=2, best_of=3).param == "best_of"
