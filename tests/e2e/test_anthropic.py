"""The Anthropic Messages API through the real server, with the official anthropic SDK:
greedy text equal to direct mlx-lm, `messages.stream()`, stop sequences, a forced tool-use
loop, structured output, thinking blocks, count_tokens and Anthropic-shaped errors."""

from __future__ import annotations

import json

import anthropic
import pytest

from tests.support import direct
from tests.support.server import model_name

MESSAGES = [{"role": "user", "content": "Write a long story about a lighthouse keeper."}]
SYSTEM = "You are terse."
MAX_TOKENS = 24
GREEDY = {"temperature": 0.0}  # anthropic 2.x takes sampling fields in the body
TOOL = {
    "name": "get_weather",
    "description": "Weather in a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "enum": ["Paris", "Tokyo"]}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def client(default_server) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=default_server.url, api_key=default_server.api_key, max_retries=0, timeout=120
    )


def chat_messages() -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, *MESSAGES]


def create(client, path, **fields):
    fields.setdefault("max_tokens", MAX_TOKENS)
    fields.setdefault("extra_body", GREEDY)
    return client.messages.create(
        model=model_name(path), messages=fields.pop("messages", MESSAGES), **fields
    )


def test_greedy_text_equals_direct_mlx_lm(client, qwen3_path):
    expected = direct.greedy_chat(qwen3_path, chat_messages(), MAX_TOKENS)
    message = create(client, qwen3_path, system=SYSTEM)
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == expected.text
    assert message.stop_reason == "max_tokens"
    usage = message.usage
    assert usage.input_tokens + usage.cache_read_input_tokens == expected.prompt_tokens
    assert usage.output_tokens == MAX_TOKENS


def test_stream_helper_yields_the_same_message(client, qwen3_path):
    whole = create(client, qwen3_path, system=SYSTEM)
    with client.messages.stream(
        model=model_name(qwen3_path),
        max_tokens=MAX_TOKENS,
        system=SYSTEM,
        messages=MESSAGES,
        extra_body=GREEDY,
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == whole.content[0].text == final.content[0].text
    assert final.stop_reason == "max_tokens"
    assert final.usage.output_tokens == MAX_TOKENS


def test_message_start_reports_the_prompt_tokens_before_any_output(client, qwen3_path):
    expected = direct.greedy_chat(qwen3_path, chat_messages(), MAX_TOKENS)
    events = list(create(client, qwen3_path, system=SYSTEM, stream=True))
    assert events[0].type == "message_start"
    usage = events[0].message.usage
    assert usage.input_tokens + usage.cache_read_input_tokens == expected.prompt_tokens
    assert usage.output_tokens == 0
    final = events[-2]  # message_delta, before message_stop
    assert final.type == "message_delta" and final.usage.output_tokens == MAX_TOKENS


def test_stop_sequences_end_the_text(client, qwen3_path):
    full = direct.greedy_chat(qwen3_path, MESSAGES, MAX_TOKENS).text
    stop = next(
        full[i : i + 3]
        for i in range(len(full) // 3, len(full) - 3)
        if full[i : i + 3].strip() and full.find(full[i : i + 3]) == i
    )
    message = create(client, qwen3_path, stop_sequences=[stop])
    assert message.content[0].text == full[: full.find(stop)]
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", stop)


def test_forced_tool_use_loop(client, qwen3_path):
    forced = {"type": "tool", "name": "get_weather"}
    first = create(client, qwen3_path, tools=[TOOL], tool_choice=forced, max_tokens=60)
    assert first.stop_reason == "tool_use"
    (use,) = [b for b in first.content if b.type == "tool_use"]
    assert use.name == "get_weather" and use.input["city"] in ("Paris", "Tokyo")
    messages = [
        *MESSAGES,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "21C"}],
        },
    ]
    second = create(
        client, qwen3_path, messages=messages, tools=[TOOL], tool_choice={"type": "none"}
    )
    assert [b.type for b in second.content] == ["text"]
    assert second.usage.input_tokens + second.usage.cache_read_input_tokens > (
        first.usage.input_tokens + first.usage.cache_read_input_tokens
    )


def test_streamed_tool_use_parses(client, qwen3_path):
    with client.messages.stream(
        model=model_name(qwen3_path),
        max_tokens=60,
        messages=MESSAGES,
        tools=[TOOL],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        extra_body=GREEDY,
    ) as stream:
        final = stream.get_final_message()
    (use,) = [b for b in final.content if b.type == "tool_use"]
    assert use.input["city"] in ("Paris", "Tokyo")
    assert final.stop_reason == "tool_use"


def test_output_config_json_schema(client, qwen3_path):
    fmt = {"type": "json_schema", "schema": ANSWER_SCHEMA}
    message = create(
        client,
        qwen3_path,
        output_config={"format": fmt},
        thinking={"type": "disabled"},  # else the answer may start with a think block
        max_tokens=40,
    )
    assert [b.type for b in message.content] == ["text"]
    assert isinstance(json.loads(message.content[0].text)["ok"], bool)


def test_thinking_blocks_hold_the_reasoning(client, qwen3_path):
    """The tiny model thinks only when pushed: logit_bias opens the block, the budget ends it."""
    _, tokenizer = direct.load_model(qwen3_path)
    think = tokenizer.convert_tokens_to_ids("<think>")
    message = create(
        client,
        qwen3_path,
        max_tokens=40,
        thinking={"type": "enabled", "budget_tokens": 6},
        output_config={"format": {"type": "json_schema", "schema": ANSWER_SCHEMA}},
        extra_body={**GREEDY, "logit_bias": {str(think): 100}},
    )
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[0].thinking
    assert "<think>" not in message.content[1].text
    assert isinstance(json.loads(message.content[1].text)["ok"], bool)


def test_count_tokens_equals_the_prompt(client, qwen3_path):
    count = client.messages.count_tokens(
        model=model_name(qwen3_path), system=SYSTEM, messages=MESSAGES
    )
    assert count.input_tokens == len(direct.chat_prompt(qwen3_path, chat_messages()))


def test_a_deferred_tool_stays_out_of_the_prompt(client, qwen3_path):
    """`defer_loading: true` (Claude Code sends a placeholder so marked with its tools): the
    tool waits for a tool search, which this server does not run, so the prompt is the one
    without it, and a malformed flag is a 400 naming it."""
    placeholder = {"name": "Placeholder", "description": "Never call this.",
                   "input_schema": {"type": "object", "properties": {}}, "defer_loading": True}  # fmt: skip

    def counted(tools):
        return client.messages.count_tokens(
            model=model_name(qwen3_path), messages=MESSAGES, tools=tools
        ).input_tokens

    without = counted([TOOL])
    assert counted([placeholder, TOOL]) == without
    assert counted([{**placeholder, "defer_loading": False}, TOOL]) > without
    with pytest.raises(anthropic.BadRequestError) as info:
        counted([{**placeholder, "defer_loading": "yes"}, TOOL])
    assert "tools[0].defer_loading" in info.value.body["error"]["message"]


def test_unsupported_block_is_an_anthropic_400(client, qwen3_path):
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "AA=="},
    }
    with pytest.raises(anthropic.BadRequestError) as info:
        create(client, qwen3_path, messages=[{"role": "user", "content": [image]}])
    assert info.value.body["type"] == "error"
    assert info.value.body["error"]["type"] == "invalid_request_error"
    assert "messages[0].content[0].type" in info.value.body["error"]["message"]


def test_a_claude_code_shaped_beta_request_is_served_with_its_context_edits(client, qwen3_path):
    """Claude Code's default turn: the context-management beta with thinking adaptive,
    cache_control blocks, metadata, effort, on `?beta=true`, streamed."""

    def turn(n: int) -> dict:
        thought = {"type": "thinking", "thinking": f"Thought {n}.", "signature": ""}
        return {"role": "assistant", "content": [thought, {"type": "text", "text": f"Part {n}."}]}

    history = [
        *MESSAGES,
        turn(1),
        {"role": "user", "content": "More."},
        turn(2),
        {
            "role": "user",
            "content": [{"type": "text", "text": "Go on.", "cache_control": {"type": "ephemeral"}}],
        },  # fmt: skip
    ]
    fields = {
        "model": model_name(qwen3_path),
        "max_tokens": MAX_TOKENS,
        "messages": history,
        "betas": ["context-management-2025-06-27"],
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "medium"},
        "metadata": {"user_id": "user_abc"},
        "extra_body": GREEDY,
    }
    for edit, cleared in ((None, 0), ({"type": "clear_thinking_20251015"}, 1)):
        edits = [edit or {"type": "clear_thinking_20251015", "keep": "all"}]
        with client.beta.messages.stream(**fields, context_management={"edits": edits}) as stream:
            final = stream.get_final_message()
        assert final.stop_reason == "max_tokens" and final.usage.output_tokens == MAX_TOKENS
        applied = final.context_management.applied_edits
        assert [a.cleared_thinking_turns for a in applied] == ([cleared] if cleared else [])


def test_claude_codes_changing_attribution_line_leaves_the_prompt_to_the_prefix_cache(
    client, qwen3_path
):
    """Claude Code's first system block is a billing line whose `cch` changes every request:
    the model is prompted without it (equal to direct mlx-lm on the rest of the system prompt),
    so a second request with another `cch` reads its whole prompt from the prefix cache."""
    system = "You are a coding agent. " * 40

    def ask(cch: str):
        attribution = f"x-anthropic-billing-header: cc_version=2.1.332.1c9; cch={cch};"
        blocks = [{"type": "text", "text": attribution}, {"type": "text", "text": system}]
        return create(client, qwen3_path, system=blocks)

    expected = direct.greedy_chat(qwen3_path, [{"role": "system", "content": system}, *MESSAGES],
                                  MAX_TOKENS)  # fmt: skip
    first, second = ask("36ee5"), ask("0aaa9")
    assert first.content[0].text == second.content[0].text == expected.text
    usage = second.usage
    assert usage.input_tokens + usage.cache_read_input_tokens == expected.prompt_tokens
    assert usage.cache_read_input_tokens >= expected.prompt_tokens - 1
