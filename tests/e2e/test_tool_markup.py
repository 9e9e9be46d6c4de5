"""Tool-call markup never reaches content, whatever ends the generation.

A call forced by tool_choice and cut off by max_tokens at every length from one token on, on
every API, streamed and not: the answer's text never holds the family's markup; what was
generated of the call is a (partial) tool call, or nothing when its name had not come.
"""

from __future__ import annotations

import anthropic
import pytest

from tests.support.server import model_name, openai_client

MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {
    "name": "get_weather",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "enum": ["Paris", "Tokyo"]}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
TOOLS = [{"type": "function", "function": WEATHER}]
MARKUP = ("<tool_call>", "</tool_call>")
LENGTHS = range(1, 14)


def clean(text: str | None) -> bool:
    return not any(m in (text or "") for m in MARKUP)


@pytest.mark.parametrize("max_tokens", LENGTHS)
def test_chat_completions(default_server, qwen3_path, max_tokens):
    client = openai_client(default_server)
    fields = {
        "model": model_name(qwen3_path),
        "messages": MESSAGES,
        "tools": TOOLS,
        "tool_choice": "required",
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    reply = client.chat.completions.create(**fields)
    choice = reply.choices[0]
    assert clean(choice.message.content), choice.message.content
    for call in choice.message.tool_calls or []:
        assert call.function.name == "get_weather"
    chunks = list(client.chat.completions.create(**fields, stream=True))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert clean(streamed), streamed
    assert streamed == (choice.message.content or "")


@pytest.mark.parametrize("max_tokens", LENGTHS)
def test_anthropic_and_responses(default_server, qwen3_path, max_tokens):
    claude = anthropic.Anthropic(
        base_url=default_server.url, api_key=default_server.api_key, max_retries=0
    )
    tool = {
        "name": "get_weather",
        "input_schema": TOOLS[0]["function"]["parameters"],
    }
    message = claude.messages.create(
        model=model_name(qwen3_path),
        max_tokens=max_tokens,
        messages=MESSAGES,
        tools=[tool],
        tool_choice={"type": "any"},
        extra_body={"temperature": 0},
    )
    assert all(clean(b.text) for b in message.content if b.type == "text"), message.content
    response = openai_client(default_server).responses.create(
        model=model_name(qwen3_path),
        input="What is the weather in Paris?",
        tools=[{"type": "function", **TOOLS[0]["function"]}],
        tool_choice="required",
        max_output_tokens=max_tokens,
        temperature=0,
    )
    assert clean(response.output_text), response.output_text
