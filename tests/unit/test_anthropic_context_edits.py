"""Anthropic context management: clearing old thinking and old tool results, its defaults,
its triggers, what it reports, and the request shapes it refuses."""

from __future__ import annotations

import asyncio
import json

import pytest

from gateway.api.anthropic_messages.context_edits import (
    CLEARED_RESULT,
    ClearThinking,
    apply_edits,
    clear_thinking,
    parse_edits,
)
from gateway.http.errors import APIError
from tests.support.fake_engine import FakeEngine, make_client


def thinking_turn(n: int) -> dict:
    return {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": f"thought {n}", "signature": ""},
            {"type": "text", "text": f"answer {n}"},
        ],
    }


def tool_turn(n: int, name: str = "read") -> list[dict]:
    use = {"type": "tool_use", "id": f"{name}{n}", "name": name, "input": {"path": f"f{n}"}}
    result = {"type": "tool_result", "tool_use_id": f"{name}{n}", "content": f"contents {n} " * 20}
    return [
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ]


def conversation_with_thinking(turns: int) -> list[dict]:
    messages = []
    for n in range(turns):
        messages += [{"role": "user", "content": f"q{n}"}, thinking_turn(n)]
    return messages + [{"role": "user", "content": "last"}]


def conversation_with_tools(uses: int, name: str = "read") -> list[dict]:
    messages = [{"role": "user", "content": "go"}]
    for n in range(uses):
        messages += tool_turn(n, name)
    return messages


async def chars(messages: list[dict]) -> int:
    """A stand-in token count: the messages' JSON length."""
    return len(json.dumps(messages))


def run(messages, edits):
    return asyncio.run(apply_edits(messages, parse_edits({"edits": edits}), chars))


def thoughts(messages) -> list[str]:
    return [
        b["thinking"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "thinking"
    ]


def results(messages) -> list[str]:
    return [
        b["content"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]


def test_clear_thinking_keeps_the_latest_turn_by_default_and_reports_it():
    messages = conversation_with_thinking(3)
    edited, applied = run(messages, [{"type": "clear_thinking_20251015"}])
    assert thoughts(edited) == ["thought 2"]
    [report] = applied
    assert report["type"] == "clear_thinking_20251015"
    assert report["cleared_thinking_turns"] == 2 and report["cleared_input_tokens"] > 0
    assert thoughts(messages) == ["thought 0", "thought 1", "thought 2"]  # not mutated


@pytest.mark.parametrize("keep", ["all", {"type": "all"}])
def test_clear_thinking_with_keep_all_changes_nothing_and_reports_nothing(keep):
    messages = conversation_with_thinking(3)
    edited, applied = run(messages, [{"type": "clear_thinking_20251015", "keep": keep}])
    assert edited == messages and applied == []


def test_clear_thinking_keeps_n_turns():
    edited, cleared = clear_thinking(conversation_with_thinking(4), 2)
    assert thoughts(edited) == ["thought 2", "thought 3"] and cleared == 2
    assert ClearThinking(None) == parse_edits({"edits": [{"type": "clear_thinking_20251015",
                                                          "keep": "all"}]})[0]  # fmt: skip


def test_clear_tool_uses_replaces_old_results_past_the_trigger_keeping_the_latest():
    messages = conversation_with_tools(5)
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": 100},
        "keep": {"type": "tool_uses", "value": 2},
    }
    edited, [report] = run(messages, [edit])
    assert results(edited)[:3] == [CLEARED_RESULT] * 3
    assert results(edited)[3:] == results(messages)[3:]
    assert report["cleared_tool_uses"] == 3 and report["cleared_input_tokens"] > 0


def test_clear_tool_uses_waits_for_its_trigger():
    messages = conversation_with_tools(5)
    edit = {"type": "clear_tool_uses_20250919"}  # default trigger: 100,000 input tokens
    assert run(messages, [edit]) == (messages, [])
    by_uses = {**edit, "trigger": {"type": "tool_uses", "value": 5}}
    assert run(messages, [by_uses]) == (messages, [])  # 5 uses do not pass 5
    assert run(conversation_with_tools(6), [by_uses])[1][0]["cleared_tool_uses"] == 3


def test_clear_tool_uses_spares_excluded_tools_and_clears_inputs_when_asked():
    messages = conversation_with_tools(2, "read") + conversation_with_tools(2, "bash")[1:]
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 0},
        "keep": {"type": "tool_uses", "value": 0},
        "exclude_tools": ["bash"],
        "clear_tool_inputs": ["read"],
    }
    edited, [report] = run(messages, [edit])
    uses = [b for m in edited if isinstance(m["content"], list) for b in m["content"]
            if b["type"] == "tool_use"]  # fmt: skip
    assert [u["input"] for u in uses if u["name"] == "read"] == [{}, {}]
    assert all(u["input"] for u in uses if u["name"] == "bash")
    assert results(edited)[:2] == [CLEARED_RESULT] * 2 and CLEARED_RESULT not in results(edited)[2:]
    assert report["cleared_tool_uses"] == 2


def test_clear_at_least_drops_an_edit_that_would_save_too_little():
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 0},
        "keep": {"type": "tool_uses", "value": 0},
        "clear_at_least": {"type": "input_tokens", "value": 10**9},
    }
    messages = conversation_with_tools(3)
    assert run(messages, [edit]) == (messages, [])


@pytest.mark.parametrize(
    ("value", "param"),
    [
        ([], "context_management"),
        ({"edits": {}}, "context_management.edits"),
        ({"edits": [{"type": "compact_20260112"}]}, "context_management.edits[0].type"),
        ({"edits": [{"type": "clear_everything"}]}, "context_management.edits[0].type"),
        (
            {"edits": [{"type": "clear_thinking_20251015", "keep": 2}]},
            "context_management.edits[0].keep",
        ),  # fmt: skip
        (
            {
                "edits": [
                    {"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": -1}}
                ]
            },
            "context_management.edits[0].keep.value",
        ),  # fmt: skip
        (
            {"edits": [{"type": "clear_tool_uses_20250919", "exclude_tools": "bash"}]},
            "context_management.edits[0].exclude_tools",
        ),  # fmt: skip
        (
            {"edits": [{"type": "clear_thinking_20251015", "extra": 1}]},
            "context_management.edits[0].extra",
        ),  # fmt: skip
    ],
)
def test_malformed_edits_are_a_400_naming_the_field(value, param):
    with pytest.raises(APIError) as caught:
        parse_edits(value)
    assert caught.value.status == 400 and caught.value.param == param


# -- through the route ---------------------------------------------------------------------


def _engine() -> FakeEngine:
    engine = FakeEngine()

    async def count_tokens(inputs):
        return len(json.dumps(inputs.messages))

    engine.count_tokens = count_tokens
    return engine


CLAUDE_CODE = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
BODY = {"model": "tiny", "max_tokens": 16, "thinking": {"type": "adaptive"}}


def test_claude_codes_default_edit_is_served_and_reported():
    engine = _engine()
    messages = conversation_with_thinking(2)
    body = {**BODY, "messages": messages, "context_management": CLAUDE_CODE}
    headers = {"anthropic-beta": "context-management-2025-06-27", "anthropic-version": "2023-06-01"}
    with make_client(engine) as client:
        response = client.post("/v1/messages?beta=true", json=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["context_management"] == {"applied_edits": []}
    [sent] = engine.requests
    assert [m.get("reasoning_content") for m in sent.inputs.messages if m["role"] == "assistant"] \
        == ["thought 0", "thought 1"]  # fmt: skip


def test_a_streamed_message_reports_its_applied_edits_in_message_delta():
    engine = _engine()
    body = {
        **BODY,
        "messages": conversation_with_thinking(3),
        "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
        "stream": True,
    }
    with make_client(engine) as client:
        response = client.post("/v1/messages", json=body)
    delta = next(
        json.loads(f.split("data: ")[1])
        for f in response.text.split("\n\n")
        if f.startswith("event: message_delta")
    )
    [report] = delta["context_management"]["applied_edits"]
    assert report["cleared_thinking_turns"] == 2
    [sent] = engine.requests
    assert [m.get("reasoning_content") for m in sent.inputs.messages if m["role"] == "assistant"] \
        == [None, None, "thought 2"]  # fmt: skip


def test_count_tokens_reports_the_original_count():
    engine = _engine()
    body = {
        "model": "tiny",
        "messages": conversation_with_thinking(3),
        "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
    }
    with make_client(engine) as client:
        got = client.post("/v1/messages/count_tokens", json=body).json()
    original = got["context_management"]["original_input_tokens"]
    assert original > got["input_tokens"] > 0
