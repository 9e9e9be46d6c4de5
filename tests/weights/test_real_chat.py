"""SmolLM2-135M-Instruct (real weights, float32) through the real server, greedy.

- The server's chat equals direct mlx-lm (`stream_generate`, greedy sampler, the chat
  template) token for token, streamed and not: the same text, the same tokens (the logprobs'
  token texts, the eos included), the same finish reason and token counts.
- Factual questions this 135M model answers right greedily (checked against direct mlx-lm
  first; it gets others wrong: the largest planet, the Red Planet, who wrote Romeo and
  Juliet, the freezing point of water) contain the expected answer.
- `response_format` json_schema output validates and names Paris and France.
- A named `tool_choice` gives one call of that tool whose arguments validate against its
  parameters and name the city asked about.
- Tools reach its prompt although its template cannot render them (the Hermes fallback).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import pytest

from tests.support.server import openai_client

pytestmark = pytest.mark.real_weights

PROMPTS = {
    "haiku": [{"role": "user", "content": "Write a haiku about the sea."}],  # ends on its own
    "cooking": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Give me three tips for learning to cook."},
    ],
    "rainbow": [{"role": "user", "content": "Explain what a rainbow is to a child."}],
}
MAX_TOKENS = 40

FACTS = [
    ("What is the capital of France? Answer in one sentence.", "Paris"),
    ("What is the capital of Japan? Answer in one sentence.", "Tokyo"),
    ("What is the capital of Italy? Answer in one sentence.", "Rome"),
    ("What is the chemical symbol for gold? Answer in one sentence.", "Au"),
    ("How many days are there in a week? Answer in one sentence.", "7"),
    ("What is the opposite of hot? Answer with one word.", "cold"),
]

CAPITAL_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 40},
        "country": {"type": "string", "maxLength": 40},
    },
    "required": ["city", "country"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 40},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city",
            "parameters": WEATHER,
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Get the current time in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
]


def create(server, path: str, messages: list[dict], **fields):
    fields.setdefault("max_tokens", MAX_TOKENS)
    return openai_client(server).chat.completions.create(
        model=Path(path).name, messages=messages, temperature=0, **fields
    )


@pytest.mark.parametrize("name", list(PROMPTS))
def test_greedy_chat_equals_direct_mlx_lm_token_for_token(real_server, smollm2, direct, name):
    messages = PROMPTS[name]
    stream = {"stream": True, "stream_options": {"include_usage": True}}
    with ThreadPoolExecutor(1) as pool:  # the direct run overlaps the server's
        future = pool.submit(direct.chat, smollm2, messages, MAX_TOKENS)
        reply = create(real_server, smollm2, messages, logprobs=True)
        chunks = list(create(real_server, smollm2, messages, logprobs=True, **stream))
        want = future.result()

    choice = reply.choices[0]
    assert choice.message.content == want["text"]
    assert [t.token for t in choice.logprobs.content] == want["token_texts"]
    assert choice.finish_reason == want["finish_reason"]
    assert reply.usage.prompt_tokens == want["prompt_tokens"]
    assert reply.usage.completion_tokens == len(want["tokens"])

    choices = [c.choices[0] for c in chunks if c.choices]
    assert "".join(c.delta.content or "" for c in choices) == want["text"]
    streamed = [t.token for c in choices if c.logprobs for t in c.logprobs.content or []]
    assert streamed == want["token_texts"]
    assert [c.finish_reason for c in choices if c.finish_reason] == [want["finish_reason"]]
    assert chunks[-1].usage.completion_tokens == len(want["tokens"])
    assert chunks[-1].usage.prompt_tokens == want["prompt_tokens"]


@pytest.mark.parametrize(("question", "answer"), FACTS, ids=[a for _, a in FACTS])
def test_factual_answers_contain_the_expected_word(real_server, smollm2, question, answer):
    messages = [{"role": "user", "content": question}]
    reply = create(real_server, smollm2, messages, max_tokens=24)
    assert answer in reply.choices[0].message.content


def test_json_schema_output_validates_and_is_sensible(real_server, smollm2):
    messages = [
        {
            "role": "user",
            "content": "What is the capital of France? Answer in JSON with the city and its "
            "country.",
        }
    ]
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "capital", "schema": CAPITAL_SCHEMA, "strict": True},
    }
    reply = create(real_server, smollm2, messages, max_tokens=60, response_format=response_format)
    value = json.loads(reply.choices[0].message.content)
    jsonschema.validate(value, CAPITAL_SCHEMA)
    assert value["city"] == "Paris" and value["country"].casefold() == "france", value
    assert reply.choices[0].finish_reason == "stop"


def test_named_tool_choice_gives_a_call_whose_arguments_validate(real_server, smollm2):
    messages = [{"role": "user", "content": "What is the weather like in Paris today?"}]
    choice = {"type": "function", "function": {"name": "get_weather"}}
    reply = create(real_server, smollm2, messages, max_tokens=60, tools=TOOLS, tool_choice=choice)
    message = reply.choices[0].message
    [call] = message.tool_calls
    assert call.function.name == "get_weather"
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, WEATHER)
    assert arguments["city"] == "Paris", arguments
    assert reply.choices[0].finish_reason == "tool_calls" and not message.content


def test_tools_reach_a_template_that_cannot_render_them(real_server, smollm2):
    """SmolLM2's template never uses `tools` (prompt_tokens was 37 with a tool and without):
    they reach it as a Hermes system block (worker/text/tool_fallback.py)."""
    messages = [{"role": "user", "content": "What is the weather like in Paris today?"}]
    plain = create(real_server, smollm2, messages, max_tokens=1)
    tooled = create(real_server, smollm2, messages, max_tokens=1, tools=TOOLS)
    assert tooled.usage.prompt_tokens > plain.usage.prompt_tokens + 100
