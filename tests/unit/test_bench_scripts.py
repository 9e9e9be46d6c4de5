"""The benchmark scripts' own logic: the agent session's variants rewrite what real clients
rewrite (and nothing else), and the real-size checkpoints have the real models' sizes."""

from __future__ import annotations

import pytest

from gateway.api.anthropic_messages.requests import parse_create
from gateway.generation.chat_body import parse_chat
from scripts.agent_session_anthropic import anthropic_body
from scripts.bandwidth_bound import kv_bytes_per_token
from scripts.bench_agent_session import KEEP_RESULTS, Session
from worker.tiny_models.real_size import SHAPES, parameters


@pytest.fixture(scope="module")
def session() -> Session:
    return Session(seed=0, prompt_words=400, tools=4, turns=6)


def test_append_only_grows(session):
    turns = session.turns("append", "s")
    for before, after in zip(turns, turns[1:], strict=False):
        assert after[: len(before)] == before and len(after) == len(before) + 2


def test_thinking_is_kept_on_the_last_assistant_turn_only(session):
    messages = session.messages("thinking_dropped", "s", 4)
    assistants = [m for m in messages if m["role"] == "assistant"]
    assert [("reasoning_content" in m) for m in assistants] == [False, False, False, True]


def test_the_system_line_changes_every_turn_and_nothing_else(session):
    a, b = session.messages("system_changes", "s", 3), session.messages("system_changes", "s", 4)
    assert a[0]["content"] != b[0]["content"] and b[1 : len(a)] == a[1:]
    assert a[0]["content"].split("\n", 1)[1] == b[0]["content"].split("\n", 1)[1]


def test_old_tool_results_are_cleared(session):
    messages = session.messages("results_cleared", "s", 6)
    results = [m["content"] for m in messages if m["role"] == "tool"]
    assert results[: 6 - KEEP_RESULTS] == ["[cleared]"] * (6 - KEEP_RESULTS)
    assert "[cleared]" not in results[6 - KEEP_RESULTS :]


def test_the_claude_code_line_changes_every_request_and_nothing_else(session):
    a, b = session.messages("claude_code", "s", 3), session.messages("claude_code", "s", 4)
    line_a, rest_a = a[0]["content"].split("\n", 1)
    line_b, rest_b = b[0]["content"].split("\n", 1)
    assert line_a.startswith("x-anthropic-billing-header:") and line_a != line_b
    assert rest_a == rest_b and b[1 : len(a)] == a[1:]
    assert session.messages("claude_code", "s", 4, attributed=False)[0]["content"] == rest_b


@pytest.mark.parametrize("variant", ["claude_code", "thinking_dropped"])
def test_the_messages_body_parses_to_the_chat_of_the_openai_request(session, variant):
    """On ours, the Anthropic request of a turn parses to the very chat (messages, tools and
    what else shapes the prompt) of the OpenAI request without the line, which is what
    `direct` templates: the same prompt, so the sides' cache reads and TTFTs compare."""
    messages = session.messages(variant, "s", 4)
    body = anthropic_body("m", messages, session.tools, 8)
    body.pop("stream")
    anthropic = parse_create(body).generation.inputs
    plain = session.messages(variant, "s", 4, attributed=False)
    chat = parse_chat({"model": "m", "messages": plain, "tools": session.tools}, 8).inputs
    assert (anthropic.messages, anthropic.tools) == (chat.messages, chat.tools)
    shaping = ("chat_template_kwargs", "tool_choice", "parallel_tool_calls", "thinking_budget")
    assert [getattr(anthropic, k) for k in shaping] == [getattr(chat, k) for k in shaping]


@pytest.mark.parametrize(("size", "billions"), [("1b", 1.24), ("3b", 3.21), ("8b", 8.03)])
def test_real_size_checkpoints_have_the_real_parameter_counts(size, billions):
    dims, tied = SHAPES[size]
    assert parameters(dims, tied) / 1e9 == pytest.approx(billions, abs=0.01)


def test_kv_bytes_of_llama_8b():
    config = {"num_attention_heads": 32, "hidden_size": 4096, "num_key_value_heads": 8,
              "num_hidden_layers": 32}  # fmt: skip
    assert kv_bytes_per_token(config) == 2 * 32 * 8 * 128 * 2  # 128 KiB a token
