"""Constrained decoding end to end on the tiny random-weight checkpoint, through generate_step.

A random model has no idea of JSON or tool calls, so whatever parses and validates here does
so because the grammar made it. Every case runs greedy and at temperature 1 (seeded). A random
model also never stops on its own inside an unbounded string or number: those answers are
closed before max_tokens and end with "length" (still parsing and validating).
"""

from __future__ import annotations

import json

import mlx.core as mx
import pytest
from mlx_lm.generate import generate_step
from mlx_lm.sample_utils import make_sampler

from protocol.messages import FinishReason
from tests.support.inputs import chat
from tests.support.inputs import constraint as as_constraint
from tests.support.schema_check import validate
from worker.text.constraints.processor import ConstraintProcessor
from worker.text.constraints.think_gate import ThinkGate
from worker.text.features import build_features, configure
from worker.text.model import load_text_model
from worker.text.prompts import chat_prompt_tokens
from worker.tiny_models import ensure_checkpoint

NO_THINKING = {"enable_thinking": False}
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
ENDS = (FinishReason.STOP, FinishReason.LENGTH)
SAMPLINGS = [pytest.param(0.0, 0, id="greedy"), pytest.param(1.0, 7, id="temperature-1")]

SCHEMAS = {
    "nested": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 12},
            "temp": {"type": "integer", "minimum": -50, "maximum": 50},
            "ok": {"type": "boolean"},
            "where": {
                "type": "object",
                "properties": {"lat": {"type": "number"}, "zone": {"enum": ["N", "S"]}},
                "required": ["lat", "zone"],
            },
        },
        "required": ["city", "temp", "ok", "where"],
    },
    "array_of_enums": {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
            "mode": {"const": "fast"},
        },
        "required": ["tags", "mode"],
        "additionalProperties": False,
    },
    "any_of": {
        "type": "object",
        "properties": {
            "value": {
                "anyOf": [
                    {"type": "integer", "minimum": 0, "maximum": 9},
                    {"type": "string", "maxLength": 4},
                    {"type": "null"},
                ]
            }
        },
        "required": ["value"],
    },
    "ref_and_formats": {
        "$defs": {"day": {"type": "string", "format": "date"}},
        "type": "object",
        "properties": {
            "start": {"$ref": "#/$defs/day"},
            "end": {"$ref": "#/$defs/day"},
            "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"},
        },
        "required": ["start", "end", "code"],
    },
}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "maxLength": 16},
                    "unit": {"enum": ["celsius", "fahrenheit"]},
                },
                "required": ["location", "unit"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "parameters": {
                "type": "object",
                "properties": {"offset": {"type": "integer", "minimum": -12, "maximum": 14}},
                "required": ["offset"],
            },
        },
    },
]
PARAMETERS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@pytest.fixture(scope="module")
def qwen3():
    text_model = load_text_model(str(ensure_checkpoint("qwen3")))
    configure(None, None, text_model.tokenizer)
    return text_model


def generate(text_model, inputs, constraint=None, temperature=0.0, seed=0, max_tokens=160):
    """Runs the request's processors and parser; returns (content, reasoning, calls, finish)."""
    tokenizer = text_model.tokenizer
    inputs = chat(**inputs, max_tokens=max_tokens, constraint=as_constraint(constraint))
    prompt = chat_prompt_tokens(tokenizer, inputs)
    features = build_features(tokenizer, inputs, prompt)
    mx.random.seed(seed)
    detokenizer = tokenizer.detokenizer
    detokenizer.reset()
    finish = FinishReason.LENGTH
    steps = generate_step(
        mx.array(prompt),
        text_model.model,
        max_tokens=max_tokens,
        sampler=make_sampler(temperature),
        logits_processors=features.logits_processors,
    )
    for token, _ in steps:
        if token in tokenizer.eos_token_ids:
            finish = FinishReason.STOP
            break
        detokenizer.add_token(token)
    detokenizer.finalize()
    parsed = features.parser.feed(detokenizer.text)
    tail, finish = features.parser.finish(finish)
    calls: dict[int, dict] = {}
    for piece in parsed.tool_calls + tail.tool_calls:
        call = calls.setdefault(piece.index, {"name": piece.name, "arguments": ""})
        call["arguments"] += piece.arguments
    return (
        parsed.content + tail.content,
        parsed.reasoning + tail.reasoning,
        [calls[i] for i in sorted(calls)],
        finish,
    )


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("temperature, seed", SAMPLINGS)
def test_json_schema_output_parses_and_validates(qwen3, name, temperature, seed):
    schema = SCHEMAS[name]
    inputs = {"messages": MESSAGES, "chat_template_kwargs": NO_THINKING}
    constraint = {"type": "json_schema", "schema": schema, "strict": True}
    content, _, _, finish = generate(qwen3, inputs, constraint, temperature, seed)
    assert finish in ENDS, content
    validate(json.loads(content), schema)


@pytest.mark.parametrize("temperature, seed", SAMPLINGS)
def test_json_object_output_is_a_json_object(qwen3, temperature, seed):
    inputs = {"messages": MESSAGES, "chat_template_kwargs": NO_THINKING}
    content, _, _, finish = generate(qwen3, inputs, {"type": "json_object"}, temperature, seed)
    assert finish in ENDS
    assert isinstance(json.loads(content), dict)


@pytest.mark.parametrize("temperature, seed", SAMPLINGS)
def test_a_constrained_answer_after_reasoning_still_validates(qwen3, temperature, seed):
    # Thinking on: the random model may open a think block; the grammar applies after it.
    schema = SCHEMAS["nested"]
    constraint = {"type": "json_schema", "schema": schema}
    content, _, _, finish = generate(qwen3, {"messages": MESSAGES}, constraint, temperature, seed)
    assert finish in ENDS
    validate(json.loads(content), schema)


@pytest.mark.parametrize("temperature, seed", SAMPLINGS)
def test_tool_choice_required_yields_a_valid_call(qwen3, temperature, seed):
    inputs = {"messages": MESSAGES, "tools": TOOLS, "tool_choice": "required"}
    content, _, calls, finish = generate(qwen3, inputs, None, temperature, seed)
    assert finish == FinishReason.TOOL_CALLS
    assert content == "" and calls
    for call in calls:
        validate(json.loads(call["arguments"]), PARAMETERS[call["name"]])


@pytest.mark.parametrize("temperature, seed", SAMPLINGS)
def test_a_named_tool_choice_yields_exactly_that_call(qwen3, temperature, seed):
    choice = {"type": "function", "function": {"name": "get_weather"}}
    inputs = {"messages": MESSAGES, "tools": TOOLS, "tool_choice": choice}
    _, _, calls, finish = generate(qwen3, inputs, None, temperature, seed)
    assert finish == FinishReason.TOOL_CALLS
    assert [c["name"] for c in calls] == ["get_weather"]
    validate(json.loads(calls[0]["arguments"]), PARAMETERS["get_weather"])


@pytest.mark.parametrize(
    "family",
    [
        "hermes",
        "qwen3_coder",
        "llama3_json",
        "mistral",
        "mistral_v11",
        "deepseek_v3",
        "deepseek_v32",
    ],
)
def test_each_family_grammar_yields_calls_its_own_parser_reads(qwen3, family):
    configure("none", family, qwen3.tokenizer)
    try:
        inputs = {
            "messages": MESSAGES,
            "tools": TOOLS,
            "tool_choice": "required",
            "parallel_tool_calls": False,
        }
        _, _, calls, finish = generate(qwen3, inputs, None, 1.0, 3)
    finally:
        configure(None, None, qwen3.tokenizer)
    assert finish == FinishReason.TOOL_CALLS
    assert len(calls) == 1
    validate(json.loads(calls[0]["arguments"]), PARAMETERS[calls[0]["name"]])


def test_thinking_budget_forces_the_end_of_thinking(qwen3):
    vocab = qwen3.tokenizer.get_vocab()
    start, end = vocab["<think>"], vocab["</think>"]
    gate = ThinkGate(start, end, starts_inside=True)
    processor = ConstraintProcessor(
        None, (len(vocab) + 31) // 32, [0], gate=gate, thinking_budget=5
    )
    prompt = chat_prompt_tokens(qwen3.tokenizer, chat(MESSAGES))
    steps = generate_step(
        mx.array(prompt), qwen3.model, max_tokens=8, logits_processors=[processor]
    )
    tokens = [token for token, _ in steps]
    assert end not in tokens[:5]
    assert tokens[5] == end
