"""Which requests get a constraint, and every unsupported combination as a 400 naming it."""

from __future__ import annotations

import pytest

from protocol.inputs import Choice, Grammar, JsonSchema, Regex
from protocol.messages import ErrorCode
from tests.support.inputs import chat, complete, constraint
from worker.runtime.errors import RequestError
from worker.text.constraints.grammars import closed_objects
from worker.text.features import build_features, configure
from worker.text.model import load_text_model
from worker.text.prompts import chat_prompt_tokens
from worker.tiny_models import ensure_checkpoint

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


def test_tools_with_auto_choice_while_thinking_parse_calls_without_constraining(qwen3):
    result = features(qwen3, {"tools": [TOOL]})
    assert result.logits_processors == []
    delta = result.parser.feed('<tool_call>\n{"name": "get_weather", "arguments": {}}\n')
    assert delta.tool_calls[0].name == "get_weather"


BARE_CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_a_bare_json_call_is_a_call_unless_tool_choice_is_none(qwen3, choice):
    """The Hermes family reads a reply that is the bare call object (Qwen2.5-Coder's GGUFs
    answer so: worker/text/parsers/bare_json.py), only when calls are allowed at all."""
    parser = features(qwen3, {"tools": [TOOL], "tool_choice": choice}).parser
    delta = parser.feed(BARE_CALL)
    tail, finish = parser.finish("stop")
    content = delta.content + tail.content
    calls = [*delta.tool_calls, *tail.tool_calls]
    if choice == "none":
        assert content == BARE_CALL and calls == [] and finish == "stop"
    else:
        assert content == "" and calls[0].name == "get_weather" and finish == "tool_calls"


def test_auto_tools_on_a_bare_call_parser_get_the_lazy_grammar(qwen3):
    """Hermes reads bare calls, so a tool request answered outside reasoning is guarded
    (constraints/bare_calls.py); not with tool_choice none, nor without tools."""
    no_thinking = {"chat_template_kwargs": {"enable_thinking": False}}
    assert len(features(qwen3, {"tools": [TOOL], **no_thinking}).logits_processors) == 1
    assert (
        features(qwen3, {"tools": [TOOL], "tool_choice": "none", **no_thinking}).logits_processors
        == []
    )
    assert features(qwen3, no_thinking).logits_processors == []


@pytest.mark.parametrize(
    "fields, spec",
    [
        ({"tool_choice": "required"}, None),  # a forced call: its own grammar, not the lazy one
        ({}, {"type": "json_object"}),  # a response_format: its grammar
        ({"chat_template_kwargs": {"enable_thinking": True}}, None),  # reasoning on
    ],
)
def test_the_lazy_grammar_stays_out_of_other_constraints(qwen3, fields, spec):
    kwargs = {"chat_template_kwargs": {"enable_thinking": False}, "tools": [TOOL], **fields}
    processors = features(qwen3, kwargs, spec).logits_processors
    thinking = fields.get("chat_template_kwargs", {}).get("enable_thinking", False)
    assert len(processors) == (0 if thinking else 1)  # the forced call's or format's grammar
    assert all(p._matcher is not None and p._trigger is None for p in processors)


def test_a_bare_json_object_without_tools_is_content(qwen3):
    parser = features(qwen3, {}).parser
    delta = parser.feed(BARE_CALL)
    tail, _ = parser.finish("stop")
    assert delta.content + tail.content == BARE_CALL and not delta.tool_calls


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


@pytest.mark.parametrize(
    "constraint",
    [
        Regex("(yes|no), [0-9]{1,3}", "guided_regex"),
        Choice(["red", "green", "blue"], "structured_outputs.choice"),
        Grammar('start: "The answer is " ANSWER "."\nANSWER: "yes" | "no"', "guided_grammar"),
    ],
    ids=lambda c: type(c).__name__,
)
def test_regex_choice_and_grammar_constraints_get_a_processor(qwen3, constraint):
    assert features(qwen3, {}, constraint).logits_processors


@pytest.mark.parametrize(
    "constraint, named",
    [
        (Regex("(ab", "structured_outputs.regex"), "structured_outputs.regex cannot be enforced"),
        (Grammar("start: foo", "guided_grammar"), "guided_grammar cannot be enforced"),
        (JsonSchema({"type": "strin"}, field="guided_json"), "guided_json cannot be enforced"),
        (Grammar("start: start", "guided_grammar"), "guided_grammar cannot be enforced"),
        (Regex("[^\\x00-\\x{10FFFF}]", "guided_regex"), "it matches no output"),
    ],
    ids=lambda c: type(c).__name__ if not isinstance(c, str) else "",
)
def test_a_constraint_that_cannot_compile_is_a_bad_request_naming_its_field(
    qwen3, constraint, named
):
    assert named in bad_request(qwen3, {}, constraint)


def test_a_forced_call_with_a_regex_is_a_bad_request_naming_the_regex(qwen3):
    inputs = {"tools": [TOOL], "tool_choice": "required"}
    assert "guided_regex" in bad_request(qwen3, inputs, Regex("a+", "guided_regex"))


def test_an_unimplemented_keyword_is_ignored_without_strict(qwen3):
    schema = {"type": "array", "uniqueItems": True}
    constraint = {"type": "json_schema", "schema": schema, "strict": False}
    assert features(qwen3, {}, constraint).logits_processors


def test_tools_on_a_template_without_tools_get_the_hermes_fallback(llama):
    """The tiny llama's template never renders tools: they are written into the prompt as a
    Hermes block (worker/text/tool_fallback.py) and a forced call uses Hermes' grammar."""
    assert features(llama, {"tools": [TOOL]}).parser is not None
    assert features(llama, {"tools": [TOOL], "tool_choice": "required"}).logits_processors


def test_tools_with_parsing_switched_off_on_a_tool_template_are_a_bad_request(qwen3):
    configure(None, "none", qwen3.tokenizer)
    try:
        assert "tools are not supported" in bad_request(qwen3, {"tools": [TOOL]})
    finally:
        configure(None, None, qwen3.tokenizer)


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
