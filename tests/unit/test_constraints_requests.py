"""Which requests get a constraint, and every unsupported combination as a 400 naming it."""

from __future__ import annotations

import pytest

from protocol.messages import ErrorCode
from scripts.checkpoints import ensure_checkpoint
from tests.support.inputs import chat, complete, constraint
from worker.runtime.errors import RequestError
from worker.text.constraints.grammars import closed_objects
from worker.text.features import build_features, configure
from worker.text.model import load_text_model
from worker.text.prompts import chat_prompt_tokens

MESSAGES = [{"role": "user", "content": "hi"}]
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.fixture(scope="module")
def qwen3():
    text_model = load_text_model(str(ensure_checkpoint("qwen3")))
    configure(None, None, text_model.tokenizer)
    return text_model


@pytest.fixture(scope="module")
def llama():
    return load_text_model(str(ensure_checkpoint("llama")))


def features(text_model, fields, spec=None):
    inputs = chat(MESSAGES, constraint=constraint(spec), **fields)
    prompt = chat_prompt_tokens(text_model.tokenizer, inputs)
    return build_features(text_model.tokenizer, inputs, prompt)


def bad_request(text_model, inputs, constraint=None) -> str:
    with pytest.raises(RequestError) as caught:
        features(text_model, inputs, constraint)
    assert caught.value.code == ErrorCode.BAD_REQUEST
    return caught.value.message


def test_a_plain_chat_gets_no_logits_processor(qwen3):
    assert features(qwen3, {}).logits_processors == []


def test_tools_with_auto_choice_parse_calls_without_constraining(qwen3):
    result = features(qwen3, {"tools": [TOOL]})
    assert result.logits_processors == []
    delta = result.parser.feed('<tool_call>\n{"name": "get_weather", "arguments": {}}\n')
    assert delta.tool_calls[0].name == "get_weather"


def test_tool_choice_none_parses_no_calls(qwen3):
    parser = features(qwen3, {"tools": [TOOL], "tool_choice": "none"}).parser
    text = '<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>'
    assert parser.feed(text).content == text


def test_a_response_format_adds_a_processor(qwen3):
    assert len(features(qwen3, {}, {"type": "json_object"}).logits_processors) == 1


def test_thinking_switched_off_by_the_template_kwargs_parses_no_reasoning(qwen3):
    parser = features(qwen3, {"chat_template_kwargs": {"enable_thinking": False}}).parser
    assert parser.feed("<think>x</think>y").content == "<think>x</think>y"


def test_a_completion_parses_no_reasoning(qwen3):
    tokenizer = qwen3.tokenizer
    prompt = tokenizer.encode("hello", add_special_tokens=False)
    result = build_features(tokenizer, complete("hello", max_tokens=4), prompt)
    assert result.parser.feed("<think>x</think>").content == "<think>x</think>"


@pytest.mark.parametrize(
    "inputs, constraint, named",
    [
        ({"tool_choice": "required"}, None, "needs tools"),
        ({"tools": [TOOL], "tool_choice": "sometimes"}, None, "tool_choice"),
        (
            {"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            None,
            "'nope'",
        ),
        ({"thinking_budget": 0}, None, "thinking_budget"),
        ({"tools": [TOOL], "tool_choice": "required"}, {"type": "json_object"}, "response_format"),
        (
            {},
            {
                "type": "json_schema",
                "schema": {"type": "array", "uniqueItems": True},
                "strict": True,
            },
            "uniqueItems",
        ),
        ({}, {"type": "json_schema", "schema": {"type": "strin"}}, "json_schema.schema"),
    ],
)
def test_unsupported_requests_are_bad_requests_naming_the_problem(qwen3, inputs, constraint, named):
    assert named in bad_request(qwen3, inputs, constraint)


def test_an_unimplemented_keyword_is_ignored_without_strict(qwen3):
    schema = {"type": "array", "uniqueItems": True}
    constraint = {"type": "json_schema", "schema": schema, "strict": False}
    assert features(qwen3, {}, constraint).logits_processors


def test_tools_on_a_model_without_a_tool_format_are_a_bad_request(llama):
    assert "tools" in bad_request(llama, {"tools": [TOOL]})


def test_a_forced_call_in_a_syntax_without_grammar_is_a_bad_request(qwen3):
    configure(None, "gemma4", qwen3.tokenizer)
    try:
        message = bad_request(qwen3, {"tools": [TOOL], "tool_choice": "required"})
    finally:
        configure(None, None, qwen3.tokenizer)
    assert "gemma4" in message and "tool_choice" in message


def test_closed_objects_closes_declared_objects_only():
    schema = {
        "type": "object",
        "properties": {
            "properties": {"type": "object", "properties": {"x": {"type": "integer"}}},
            "free": {"type": "object"},
            "open": {"type": "object", "properties": {}, "additionalProperties": True},
        },
    }
    closed = closed_objects(schema)
    assert closed["additionalProperties"] is False
    inner = closed["properties"]["properties"]
    assert (
        inner["additionalProperties"] is False and "additionalProperties" not in inner["properties"]
    )
    assert "additionalProperties" not in closed["properties"]["free"]
    assert closed["properties"]["open"]["additionalProperties"] is True
