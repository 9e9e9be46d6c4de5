"""Streaming behaviour of the output parsers: what is released when, what is held back."""

from __future__ import annotations

import json

from protocol.messages import FinishReason
from worker.text.parsers.output import OutputParser
from worker.text.parsers.reasoning import QWEN3, ReasoningParser
from worker.text.parsers.registry import tool_format
from worker.text.parsers.tool_base import ToolContext

HERMES_CALL = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris, France", '
    '"unit": "celsius", "days": [1, 2, 3]}}\n</tool_call>'
)


def hermes(parallel: bool = True) -> OutputParser:
    return OutputParser(tools=tool_format("hermes").make_parser(ToolContext.of(None, parallel)))


def feed_chars(parser: OutputParser, text: str) -> list:
    return [parser.feed(char) for char in text]


def test_arguments_stream_in_many_pieces_not_at_the_end():
    deltas = feed_chars(hermes(), HERMES_CALL)
    argument_pieces = [c for d in deltas for c in d.tool_calls if c.id is None and c.arguments]
    assert len(argument_pieces) > 10


def test_the_call_begins_as_soon_as_its_name_is_complete():
    parser = hermes()
    before_name_end = HERMES_CALL.index('get_weather"') + len("get_weather")
    early = [d for d in feed_chars(parser, HERMES_CALL[:before_name_end]) if d.tool_calls]
    assert early == []
    begun = parser.feed('"').tool_calls
    assert [(c.index, c.name) for c in begun] == [(0, "get_weather")]


def test_joined_argument_pieces_are_the_arguments_json_text():
    deltas = feed_chars(hermes(), HERMES_CALL)
    text = "".join(c.arguments for d in deltas for c in d.tool_calls)
    assert json.loads(text) == {"location": "Paris, France", "unit": "celsius", "days": [1, 2, 3]}


def test_a_partial_start_marker_is_held_back_then_released_as_the_call():
    parser = hermes()
    first = parser.feed("Checking. <tool")
    assert first.content == "Checking. "
    rest = parser.feed('_call>\n{"name": "f", "arguments": {}}\n</tool_call>')
    assert rest.content == "" and rest.tool_calls[0].name == "f"


def test_text_that_only_starts_like_a_marker_is_released_once_it_differs():
    parser = hermes()
    assert parser.feed("a <tool").content == "a "
    assert parser.feed("box> b").content == "<toolbox> b"


def test_held_back_text_is_flushed_at_the_end():
    parser = hermes()
    assert parser.feed("x <tool_ca").content == "x "
    tail, finish = parser.finish(FinishReason.STOP)
    assert tail.content == "<tool_ca"
    assert finish == FinishReason.STOP


def test_finish_reason_becomes_tool_calls_only_after_a_stop():
    parser = hermes()
    parser.feed(HERMES_CALL)
    assert parser.finish(FinishReason.STOP)[1] == FinishReason.TOOL_CALLS
    parser = hermes()
    parser.feed(HERMES_CALL)
    assert parser.finish(FinishReason.LENGTH)[1] == FinishReason.LENGTH


def test_each_call_gets_its_own_id():
    parser = hermes()
    delta = parser.feed(HERMES_CALL + "\n" + HERMES_CALL)
    ids = [c.id for c in delta.tool_calls if c.id]
    assert len(ids) == 2 and len(set(ids)) == 2


def test_without_parallel_calls_the_second_call_is_dropped_entirely():
    delta = hermes(parallel=False).feed(HERMES_CALL + "\n" + HERMES_CALL)
    assert {c.index for c in delta.tool_calls} == {0}
    assert delta.content == ""


def test_qwen3_coder_arguments_stream_one_parameter_at_a_time():
    parser = OutputParser(tools=tool_format("qwen3_coder").make_parser(ToolContext.of(None)))
    head = parser.feed("<tool_call>\n<function=ls>\n<parameter=path>\nsrc\n</parameter>\n")
    assert "".join(c.arguments for c in head.tool_calls) == '{"path": "src"'
    tail = parser.feed("<parameter=all>\nyes\n</parameter>\n</function>\n</tool_call>")
    assert "".join(c.arguments for c in tail.tool_calls) == ', "all": "yes"}'


def test_a_split_end_of_thinking_marker_is_never_shown():
    parser = OutputParser(ReasoningParser(QWEN3, starts_inside=True))
    pieces = [parser.feed(t) for t in ("Thinking hard.</th", "ink>\n\nAnswer", ".")]
    assert [p.reasoning for p in pieces] == ["Thinking hard.", "", ""]
    assert [p.content for p in pieces] == ["", "Answer", "."]


def test_in_reasoning_follows_the_think_block():
    parser = OutputParser(ReasoningParser(QWEN3, starts_inside=False))
    assert not parser.in_reasoning
    parser.feed("<think>\nhmm")
    assert parser.in_reasoning
    parser.feed("</think>\nok")
    assert not parser.in_reasoning


def test_a_tool_call_written_while_thinking_is_reasoning_not_a_call():
    tools = tool_format("hermes").make_parser(ToolContext.of(None))
    parser = OutputParser(ReasoningParser(QWEN3, starts_inside=True), tools)
    delta = parser.feed(HERMES_CALL + "</think>\n\nNo call needed.")
    tail, finish = parser.finish(FinishReason.STOP)
    assert delta.tool_calls == [] and tail.tool_calls == []
    assert "<tool_call>" in delta.reasoning
    assert delta.content + tail.content == "No call needed."
    assert finish == FinishReason.STOP
