"""Tools, structured output, reasoning and n > 1 on the OpenAI chat API, through the real
server on the tiny random-weight qwen3 checkpoint. Constrained decoding is what makes a random
model's tool calls and JSON valid, so the schemas here are finite (enums, booleans): the
grammar itself ends the document well inside max_tokens."""

from __future__ import annotations

import json

from tests.support import direct
from tests.support.server import model_name, openai_client

MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Paris", "Tokyo"]},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_PARAMETERS}},
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "parameters": {
                "type": "object",
                "properties": {"utc": {"type": "boolean"}},
                "required": ["utc"],
                "additionalProperties": False,
            },
        },
    },
]
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "enum": ["yes", "no"]},
        "sure": {"type": "boolean"},
    },
    "required": ["answer", "sure"],
    "additionalProperties": False,
}


def create(server, path, **fields):
    fields.setdefault("max_tokens", 80)
    fields.setdefault("temperature", 0)
    return openai_client(server).chat.completions.create(
        model=model_name(path), messages=fields.pop("messages", MESSAGES), **fields
    )


def valid_weather(arguments: str) -> bool:
    value = json.loads(arguments)
    return set(value) == {"city", "unit"} and value["city"] in ("Paris", "Tokyo")


def test_required_tool_choice_returns_a_valid_call(default_server, qwen3_path):
    # One call: with parallel calls allowed a random model keeps calling until max_tokens.
    reply = create(
        default_server, qwen3_path, tools=TOOLS, tool_choice="required", parallel_tool_calls=False
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert not choice.message.content
    (call,) = choice.message.tool_calls
    assert call.function.name in ("get_weather", "get_time")
    assert isinstance(json.loads(call.function.arguments), dict)
    assert call.id


def test_named_tool_choice_calls_that_function(default_server, qwen3_path):
    named = {"type": "function", "function": {"name": "get_weather"}}
    choice = create(default_server, qwen3_path, tools=TOOLS, tool_choice=named).choices[0]
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather"
    assert valid_weather(call.function.arguments)


def test_streamed_tool_call_arrives_as_incremental_tool_call_deltas(default_server, qwen3_path):
    named = {"type": "function", "function": {"name": "get_weather"}}
    chunks = list(create(default_server, qwen3_path, tools=TOOLS, tool_choice=named, stream=True))
    pieces = [call for c in chunks if c.choices for call in (c.choices[0].delta.tool_calls or [])]
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == ""
    assert pieces[0].function.name == "get_weather" and pieces[0].id
    assert all(p.function.name is None for p in pieces[1:])  # later pieces: arguments only
    arguments = "".join(p.function.arguments or "" for p in pieces)
    assert valid_weather(arguments)
    whole = create(default_server, qwen3_path, tools=TOOLS, tool_choice=named).choices[0]
    assert arguments == whole.message.tool_calls[0].function.arguments
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"


def test_a_reply_that_opens_json_but_no_call_is_left_as_written(default_server, qwen3_path):
    """tool_choice auto: the lazy grammar of bare calls (worker/text/constraints/bare_calls.py)
    holds only a reply that opens `{"name":`; one that opens with other JSON (`{{`, forced here
    with logit_bias) is never masked and stays content. The grammar's hold on a call is
    tested on the real default (tests/weights/test_embedded_default.py)."""
    _, tokenizer = direct.load_model(qwen3_path)
    (brace,) = tokenizer.encode("{", add_special_tokens=False)
    fields = {
        "logit_bias": {str(brace): 100},
        "extra_body": {"chat_template_kwargs": {"enable_thinking": False}},
        "max_tokens": 8,
    }
    choice = create(default_server, qwen3_path, tools=TOOLS, **fields).choices[0]
    assert choice.message.content == "{" * 8 and not choice.message.tool_calls
    assert choice.finish_reason == "length"


def test_a_template_without_tools_sees_them_and_forced_calls_work(llama_server, llama_path):
    """The tiny llama's template never renders tools (as SmolLM2's): the gateway still sends
    them, the worker writes them into the prompt as a Hermes block, and calls are read back."""
    plain = create(llama_server, llama_path, max_tokens=1)
    tooled = create(llama_server, llama_path, tools=TOOLS, max_tokens=1)
    assert tooled.usage.prompt_tokens > plain.usage.prompt_tokens + 50
    named = {"type": "function", "function": {"name": "get_weather"}}
    choice = create(llama_server, llama_path, tools=TOOLS, tool_choice=named).choices[0]
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather" and valid_weather(call.function.arguments)


def test_tool_result_round_trip(default_server, qwen3_path):
    named = {"type": "function", "function": {"name": "get_weather"}}
    first = create(default_server, qwen3_path, tools=TOOLS, tool_choice=named).choices[0]
    call = first.message.tool_calls[0]
    messages = [
        *MESSAGES,
        first.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 21}'},
    ]
    reply = create(
        default_server,
        qwen3_path,
        messages=messages,
        tools=TOOLS,
        tool_choice="none",
        max_tokens=16,
    )
    assert reply.choices[0].message.tool_calls is None
    assert "<tool_call>" not in reply.choices[0].message.content
    assert reply.choices[0].finish_reason in ("stop", "length")


def test_json_schema_response_format_parses_and_validates(default_server, qwen3_path):
    fmt = {
        "type": "json_schema",
        "json_schema": {"name": "A", "schema": ANSWER_SCHEMA, "strict": True},
    }
    reply = create(default_server, qwen3_path, response_format=fmt)
    value = json.loads(reply.choices[0].message.content)
    assert value["answer"] in ("yes", "no") and isinstance(value["sure"], bool)
    assert set(value) == {"answer", "sure"}
    assert reply.choices[0].finish_reason == "stop"


def test_streamed_json_arrives_incrementally_and_parses(default_server, qwen3_path):
    # 128 enum items after the answer: some 500 tokens, so the stream lasts long enough (about a
    # second here) that it cannot all wait for the gateway at once. The gateway merges the
    # deltas that wait for it when it falls behind (a loaded CI machine, two test processes on
    # two cores): a 75-token stream (0.3 s) arrived as one piece three times running there.
    schema = {
        **ANSWER_SCHEMA,
        "properties": {
            **ANSWER_SCHEMA["properties"],
            "steps": {
                "type": "array",
                "items": {"type": "string", "enum": ["look", "think", "answer"]},
                "minItems": 128,
                "maxItems": 128,
            },
        },
        "required": ["answer", "sure", "steps"],
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "A", "schema": schema, "strict": True}}
    # Thinking off: under a constraint the random model may open a think block and spend most
    # of max_tokens there, leaving the JSON to a few forced tokens at the end.
    no_think = {"chat_template_kwargs": {"enable_thinking": False}}
    counts = []
    for _ in range(3):
        chunks = list(
            create(
                default_server,
                qwen3_path,
                response_format=fmt,
                stream=True,
                max_tokens=1000,
                extra_body=no_think,
            )
        )
        pieces = [
            c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
        ]
        value = json.loads("".join(pieces))
        assert set(value) == {"answer", "sure", "steps"} and len(value["steps"]) == 128
        counts.append(len(pieces))
        if len(pieces) > 1:
            break
    assert max(counts) > 1, counts


def test_reasoning_goes_to_reasoning_content_never_content(default_server, qwen3_path):
    """logit_bias makes the tiny model open a think block at once; the JSON
    format then ends the reasoning (by the constraint's thinking budget) and shapes the answer."""
    _, tokenizer = direct.load_model(qwen3_path)
    think = tokenizer.convert_tokens_to_ids("<think>")
    fmt = {
        "type": "json_schema",
        "json_schema": {"name": "A", "schema": ANSWER_SCHEMA, "strict": True},
    }
    kwargs = dict(logit_bias={str(think): 100}, response_format=fmt, max_tokens=40)
    reply = create(default_server, qwen3_path, **kwargs)
    message = reply.choices[0].message
    assert message.model_extra["reasoning_content"]
    assert set(json.loads(message.content)) == {"answer", "sure"}
    assert reply.usage.completion_tokens_details.reasoning_tokens > 0

    chunks = [c for c in create(default_server, qwen3_path, stream=True, **kwargs) if c.choices]
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert (reasoning, content) == (message.model_extra["reasoning_content"], message.content)


def test_enable_thinking_reaches_the_chat_template(default_server, qwen3_path):
    reply = create(
        default_server,
        qwen3_path,
        max_tokens=1,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    _, tokenizer = direct.load_model(qwen3_path)
    prompt = tokenizer.apply_chat_template(
        MESSAGES, add_generation_prompt=True, enable_thinking=False
    )
    assert reply.usage.prompt_tokens == len(prompt)
    assert reply.usage.prompt_tokens > len(direct.chat_prompt(qwen3_path, MESSAGES))


def test_n_choices_are_independent_and_seeded(default_server, qwen3_path):
    kwargs = dict(n=3, seed=11, temperature=1.0, max_tokens=12)
    first = create(default_server, qwen3_path, **kwargs)
    again = create(default_server, qwen3_path, **kwargs)
    texts = [c.message.content for c in first.choices]
    assert [c.index for c in first.choices] == [0, 1, 2]
    assert texts == [c.message.content for c in again.choices]
    assert len(set(texts)) > 1
    single = create(default_server, qwen3_path, seed=12, temperature=1.0, max_tokens=12)
    assert single.choices[0].message.content == texts[1]  # choice i is seeded seed + i
