"""Every tool-call and reasoning parser against real model-family output (tests/data/parsers).

Each sample is fed whole, one character at a time, in fixed-size pieces and in random pieces:
markers split anywhere must give the same content, reasoning and calls.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from protocol.messages import FinishReason
from worker.text.parsers.output import OutputParser
from worker.text.parsers.reasoning import FORMATS, ReasoningParser
from worker.text.parsers.registry import tool_format
from worker.text.parsers.tool_base import ToolContext

DATA = Path(__file__).resolve().parents[1] / "data" / "parsers"
# data file -> tool-call parser name (None: reasoning only)
FAMILIES = {
    "hermes": "hermes",
    "qwen3_coder": "qwen3_coder",
    "llama3_json": "llama3_json",
    "mistral": "mistral",
    "deepseek": "deepseek_v3",
    "deepseek_v32": "deepseek_v32",
    "gemma4": "gemma4",
    "function_gemma": "function_gemma",
    "pythonic": "pythonic",
    "reasoning": None,
}


def cases() -> list[Any]:
    params = []
    for family, parser_name in FAMILIES.items():
        for case in json.loads((DATA / f"{family}.json").read_text()):
            params.append(pytest.param(parser_name, case, id=f"{family}: {case['name']}"))
    return params


def chunkings(text: str) -> list[list[str]]:
    sizes = [[len(text) or 1], [1], [2], [3], [5], [13]]
    result = [[text[i : i + size[0]] for i in range(0, len(text), size[0])] for size in sizes]
    for seed in range(4):
        rng, pieces, i = random.Random(seed), [], 0
        while i < len(text):
            step = rng.randint(1, 9)
            pieces.append(text[i : i + step])
            i += step
        result.append(pieces)
    return result


def make_parser(parser_name: str | None, case: dict) -> OutputParser:
    reasoning = None
    if case.get("reasoning"):
        fmt = FORMATS[case["reasoning"]]
        prompt_tail = "<|im_start|>assistant\n" + ("<think>\n" if case.get("starts_inside") else "")
        reasoning = ReasoningParser(fmt, fmt.starts_inside(prompt_tail))
    tools = None
    if parser_name is not None:
        context = ToolContext.of(case.get("tools"), case.get("parallel", True))
        tools = tool_format(parser_name).make_parser(context)
    return OutputParser(reasoning, tools)


def run(parser: OutputParser, pieces: list[str], finish: str) -> dict:
    content, reasoning, deltas = [], [], []
    for piece in pieces:
        parsed = parser.feed(piece)
        content.append(parsed.content)
        reasoning.append(parsed.reasoning)
        deltas.extend(parsed.tool_calls)
    tail, finish = parser.finish(finish)
    content.append(tail.content)
    reasoning.append(tail.reasoning)
    deltas.extend(tail.tool_calls)
    return {
        "content": "".join(content),
        "reasoning": "".join(reasoning),
        "deltas": deltas,
        "finish": finish,
    }


def assemble(deltas: list) -> list[dict]:
    """Tool-call pieces -> calls; checks the piece contract on the way."""
    calls: dict[int, dict] = {}
    for delta in deltas:
        if delta.index not in calls:
            assert delta.id and delta.id.startswith("call_"), "a call's first piece carries its id"
            assert delta.name, "a call's first piece carries its name"
            calls[delta.index] = {"name": delta.name, "arguments_text": ""}
        else:
            assert delta.id is None and delta.name is None, "later pieces carry arguments only"
        calls[delta.index]["arguments_text"] += delta.arguments
    assert sorted(calls) == list(range(len(calls))), "indexes count up from 0"
    return [calls[i] for i in sorted(calls)]


@pytest.mark.parametrize("parser_name, case", cases())
def test_parser_splits_the_sample_whatever_the_chunking(parser_name, case):
    expected = case["expected"]
    for pieces in chunkings(case["text"]):
        result = run(make_parser(parser_name, case), pieces, case.get("finish", FinishReason.STOP))
        where = f"pieces {pieces[:4]}..."
        assert result["content"] == expected.get("content", ""), where
        assert result["reasoning"] == expected.get("reasoning", ""), where
        assert result["finish"] == expected["finish"], where
        calls = assemble(result["deltas"])
        assert [c["name"] for c in calls] == [c["name"] for c in expected.get("tool_calls", [])]
        for call, want in zip(calls, expected.get("tool_calls", []), strict=True):
            if "arguments_text" in want:
                assert call["arguments_text"] == want["arguments_text"], where
            else:
                assert json.loads(call["arguments_text"]) == want["arguments"], where
