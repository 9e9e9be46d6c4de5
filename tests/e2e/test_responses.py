"""The OpenAI Responses API through the real server, with the official openai SDK's
`client.responses` calls: greedy text equal to direct mlx-lm, the stream helper, a function
call answered through `previous_response_id`, JSON output, max_output_tokens."""

from __future__ import annotations

import json

from tests.support import direct
from tests.support.server import model_name, openai_client

INSTRUCTIONS = "You are terse."
PROMPT = "Write a long story about a lighthouse keeper."
MAX_TOKENS = 24
TOOL = {
    "type": "function",
    "name": "get_weather",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "enum": ["Paris", "Tokyo"]}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}


def create(server, path, **fields):
    fields.setdefault("max_output_tokens", MAX_TOKENS)
    fields.setdefault("temperature", 0)
    return openai_client(server).responses.create(model=model_name(path), **fields)


def test_greedy_output_equals_direct_mlx_lm(default_server, qwen3_path):
    messages = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": PROMPT}]
    expected = direct.greedy_chat(qwen3_path, messages, MAX_TOKENS)
    response = create(default_server, qwen3_path, instructions=INSTRUCTIONS, input=PROMPT)
    assert response.output_text == expected.text
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage.input_tokens == expected.prompt_tokens
    assert response.usage.output_tokens == MAX_TOKENS


def test_streamed_text_equals_the_non_streamed(default_server, qwen3_path):
    whole = create(default_server, qwen3_path, input=PROMPT)
    events = list(create(default_server, qwen3_path, input=PROMPT, stream=True))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == whole.output_text
    # max_output_tokens reached: OpenAI ends such a stream with response.incomplete
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.output_text == whole.output_text


def test_stream_helper_returns_the_final_response(default_server, qwen3_path):
    client = openai_client(default_server)
    with client.responses.stream(
        model=model_name(qwen3_path),
        input="Is it sunny?",
        text={"format": {"type": "json_schema", "name": "A", "schema": SCHEMA, "strict": True}},
        reasoning={"effort": "none"},
        max_output_tokens=40,
        temperature=0,
    ) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text
    assert isinstance(json.loads(final.output_text)["ok"], bool)


def test_function_call_answered_through_previous_response_id(default_server, qwen3_path):
    first = create(
        default_server,
        qwen3_path,
        input="Weather in Paris?",
        tools=[TOOL],
        tool_choice={"type": "function", "name": "get_weather"},
        max_output_tokens=60,
    )
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather"
    assert json.loads(call.arguments)["city"] in ("Paris", "Tokyo")
    second = create(
        default_server,
        qwen3_path,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "21C"}],
        tools=[TOOL],
        tool_choice="none",
    )
    assert second.previous_response_id == first.id
    assert [item.type for item in second.output] == ["message"]
    assert second.usage.input_tokens > first.usage.input_tokens
    fetched = openai_client(default_server).responses.retrieve(second.id)
    assert fetched.output_text == second.output_text


def test_a_deferred_function_stays_out_of_the_prompt(default_server, qwen3_path):
    """`defer_loading: true` (tool search): no tool search runs here, so the function is left
    out of the prompt, and the Response repeats it as sent."""
    deferred = {**TOOL, "name": "get_time", "defer_loading": True}

    def prompt_tokens(tools):
        return create(default_server, qwen3_path, input=PROMPT, tools=tools, max_output_tokens=1)

    with_deferred, without = prompt_tokens([deferred, TOOL]), prompt_tokens([TOOL])
    assert with_deferred.usage.input_tokens == without.usage.input_tokens
    loaded = prompt_tokens([{**deferred, "defer_loading": False}, TOOL])
    assert loaded.usage.input_tokens > without.usage.input_tokens
    assert [t.name for t in with_deferred.tools] == ["get_time", "get_weather"]
    assert with_deferred.tools[0].defer_loading is True


def test_json_schema_text_format(default_server, qwen3_path):
    response = create(
        default_server,
        qwen3_path,
        input="Is it sunny?",
        text={"format": {"type": "json_schema", "name": "A", "schema": SCHEMA, "strict": True}},
        reasoning={"effort": "none"},
        max_output_tokens=40,
    )
    assert isinstance(json.loads(response.output_text)["ok"], bool)
    assert response.status == "completed"
