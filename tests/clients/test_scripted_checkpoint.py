"""The tier's model (worker/tiny_models/scripted.py) as mlx-lm itself runs it, greedy and
sampled: it thinks, answers and ends its turn; with <think> banned it calls `llm_time`; after
a tool result it answers; a long prompt takes seconds."""

from __future__ import annotations

import time

import pytest
from mlx_lm import load, stream_generate
from mlx_lm.sample_utils import make_logits_processors, make_sampler

from worker.tiny_models.scripted import ANSWER, CALL_CLOSE, CALL_OPEN, THINKING, TOOL_NAME

pytestmark = pytest.mark.clients
THOUGHT_AND_ANSWER = f"<think>{THINKING}</think>\n\n{ANSWER}"
TOOL_CALL = f"<tool_call>{CALL_OPEN}{TOOL_NAME}{CALL_CLOSE}</tool_call>"
TOOLS = [
    {
        "type": "function",
        "function": {"name": TOOL_NAME, "parameters": {"type": "object", "properties": {}}},
    }
]
ASKED = [{"role": "user", "content": "What time is it?"}]
ANSWERED = [
    *ASKED,
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": TOOL_NAME, "arguments": {}}}],
    },
    {"role": "tool", "content": "12:00"},
]


@pytest.fixture(scope="module")
def model(scripted_checkpoint):
    return load(str(scripted_checkpoint))


def generate(model, messages, temperature=0.0, ban_think=False, **template) -> str:
    model, tokenizer = model
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, **template)
    bias = {tokenizer.convert_tokens_to_ids("<think>"): -100.0} if ban_think else None
    text, last = "", None
    for last in stream_generate(
        model,
        tokenizer,
        prompt,
        max_tokens=64,
        sampler=make_sampler(temp=temperature),
        logits_processors=make_logits_processors(logit_bias=bias),
    ):
        text += last.text
    assert last is not None and last.finish_reason == "stop", text  # it ended its turn
    return text


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_thinks_answers_and_ends_its_turn(model, temperature):
    assert generate(model, ASKED, temperature) == THOUGHT_AND_ANSWER
    assert generate(model, ASKED, temperature, enable_thinking=False) == ANSWER


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_calls_the_tool_when_think_is_banned_and_answers_its_result(model, temperature):
    assert generate(model, ASKED, temperature, ban_think=True, tools=TOOLS) == TOOL_CALL
    assert generate(model, ANSWERED, temperature, ban_think=True, tools=TOOLS) == (
        THOUGHT_AND_ANSWER
    )


def test_a_long_prompt_takes_seconds(model):
    _, tokenizer = model
    system = " ".join(f"Rule {i}: keep the answer short." for i in range(6000))
    messages = [{"role": "system", "content": system}, *ANSWERED]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tools=TOOLS)
    assert len(prompt) > 50_000
    started = time.monotonic()
    assert generate(model, messages, ban_think=True, tools=TOOLS) == THOUGHT_AND_ANSWER
    assert time.monotonic() - started < 30
