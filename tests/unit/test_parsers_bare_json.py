"""Bare JSON tool calls (worker/text/parsers/bare_json.py): a reply that opens with the call
object, or the object in a fenced block, is the call; anything else is left to the family's
parser, streamed in any cut."""

from __future__ import annotations

import json

import pytest

from worker.text.parsers import hermes
from worker.text.parsers.tool_base import ToolContext

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
FILE = {"type": "function", "function": {"name": "read_file", "parameters": {}}}
CONTEXT = ToolContext.of([WEATHER, FILE])
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


def run(text: str, step: int, context: ToolContext = CONTEXT) -> tuple[str, list[tuple]]:
    """Content and calls (name, arguments) of `text` fed `step` characters at a time."""
    parser = hermes.FORMAT.make_parser(context)
    content, pieces = [], []
    for start in range(0, len(text), step):
        text_out, calls = parser.feed(text[start : start + step])
        content.append(text_out)
        pieces += calls
    tail, calls = parser.finish()
    content.append(tail)
    pieces += calls
    calls_out: dict[int, list] = {}
    for piece in pieces:
        entry = calls_out.setdefault(piece.index, [piece.name, ""])
        entry[1] += piece.arguments
    return "".join(content), [(n, json.loads(a)) for n, a in calls_out.values()]


PARIS = ("get_weather", {"city": "Paris"})


@pytest.mark.parametrize("step", [1, 3, 7, 1000])
@pytest.mark.parametrize(
    "reply",
    [
        CALL,
        f"\n  {CALL}\n",
        f"```json\n{CALL}\n```",
        '```json\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Paris"\n  }\n}\n```\n',
        f"```\n{CALL}\n```",
    ],
    ids=["bare", "spaced", "fenced", "fenced-pretty", "plain-fence"],
)
def test_a_reply_that_is_the_call_object_is_the_call(reply, step):
    assert run(reply, step) == ("", [PARIS])


@pytest.mark.parametrize("step", [1, 5, 1000])
def test_consecutive_objects_are_parallel_calls(step):
    second = '{"name": "read_file", "arguments": {"path": "a.py"}}'
    content, calls = run(f"```json\n{CALL}\n```\n```json\n{second}\n```", step)
    assert content == "" and calls == [PARIS, ("read_file", {"path": "a.py"})]


@pytest.mark.parametrize("step", [1, 4, 1000])
@pytest.mark.parametrize(
    "reply",
    [
        '{"name": "delete_everything", "arguments": {}}',  # no such tool
        '{"name": "get_weather", "arguments": "Paris"}',  # arguments not an object
        '{"name": "get_weather", "arguments": {}, "why": 1}',  # more than a call
        '{"answer": 42}',
        "The weather in Paris is mild.",
        "```python\nprint(1)\n```",
        "```json\n[1, 2]\n```",
    ],
)
def test_anything_else_is_content_as_written(reply, step):
    assert run(reply, step) == (reply, [])


def test_text_after_a_call_is_content_and_hermes_blocks_are_still_calls():
    content, calls = run(f"{CALL}\nDone.", 2)
    assert calls == [PARIS] and content.strip() == "Done."
    hermes_reply = f"<tool_call>\n{CALL}\n</tool_call>"
    assert run(hermes_reply, 3) == ("", [PARIS])


def test_a_cut_off_object_is_content():
    assert run('{"name": "get_weather", "argu', 4) == ('{"name": "get_weather", "argu', [])
