"""Tool-aware chat prompts (tools, tool calls, tool results, earlier reasoning) and count_tokens."""

from __future__ import annotations

import queue

import pytest

from protocol.messages import ControlCall, ControlMethod, ErrorCode
from tests.support.inputs import chat
from worker.runtime.errors import RequestError
from worker.runtime.handoff import Handoff
from worker.runtime.io_threads import Receiver
from worker.runtime.stats import WorkerStats
from worker.text.model import load_text_model
from worker.text.prompts import build_chat_prompt, chat_prompt_tokens
from worker.text.token_counting import TokenizerCalls, count_chat_tokens
from worker.tiny_models import ensure_checkpoint

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
CALL = {
    "id": "call_abc",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}
CONVERSATION = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_abc", "content": "18 C, sunny"},
]


@pytest.fixture(scope="module")
def qwen3():
    return load_text_model(str(ensure_checkpoint("qwen3")))


def prompt_text(text_model, inputs) -> str:
    return text_model.tokenizer.decode(chat_prompt_tokens(text_model.tokenizer, chat(**inputs)))


def bad_request(text_model, inputs) -> str:
    with pytest.raises(RequestError) as caught:
        chat_prompt_tokens(text_model.tokenizer, chat(**inputs))
    assert caught.value.code == ErrorCode.BAD_REQUEST
    return caught.value.message


def test_tools_are_rendered_by_the_template(qwen3):
    text = prompt_text(qwen3, {"messages": CONVERSATION[:1], "tools": [TOOL]})
    assert "<tools>" in text and '"name": "get_weather"' in text


def test_a_prompt_with_tools_is_what_apply_chat_template_gives_with_tools(qwen3):
    messages = CONVERSATION[:1]
    expected = qwen3.tokenizer.apply_chat_template(
        messages, tools=[TOOL], add_generation_prompt=True
    )
    assert build_chat_prompt(qwen3.tokenizer, messages, tools=[TOOL]) == list(expected)


def test_tools_are_rendered_also_with_tool_choice_none(qwen3):
    inputs = {"messages": CONVERSATION[:1], "tools": [TOOL], "tool_choice": "none"}
    assert "<tools>" in prompt_text(qwen3, inputs)


def test_an_earlier_call_and_its_result_are_rendered(qwen3):
    text = prompt_text(qwen3, {"messages": CONVERSATION, "tools": [TOOL]})
    assert (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in text
    )
    assert "<tool_response>\n18 C, sunny\n</tool_response>" in text


def test_call_arguments_reach_the_template_as_an_object(qwen3):
    # A template that `tojson`s the arguments must not get a JSON string inside a string.
    messages = [dict(m) for m in CONVERSATION]
    messages[1]["tool_calls"] = [
        {**CALL, "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    ]
    as_object = build_chat_prompt(qwen3.tokenizer, messages, tools=[TOOL])
    assert build_chat_prompt(qwen3.tokenizer, CONVERSATION, tools=[TOOL]) == as_object


def test_earlier_reasoning_reaches_the_template(qwen3):
    messages = [
        {"role": "user", "content": "2+2?"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "Add them.",
            "tool_calls": [CALL],
        },
        {"role": "tool", "tool_call_id": "call_abc", "content": "4"},
    ]
    assert "<think>\nAdd them.\n</think>" in prompt_text(qwen3, {"messages": messages})


def test_a_developer_message_is_a_system_message(qwen3):
    developer = [{"role": "developer", "content": "Be brief."}, CONVERSATION[0]]
    system = [{"role": "system", "content": "Be brief."}, CONVERSATION[0]]
    assert chat_prompt_tokens(qwen3.tokenizer, chat(developer)) == chat_prompt_tokens(
        qwen3.tokenizer, chat(system)
    )


@pytest.mark.parametrize(
    "inputs, named",
    [
        ({"tools": [{"type": "retrieval"}]}, "tools[0]"),
        ({"tools": [{"type": "function", "function": {}}]}, "tools[0].function"),
        (
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]},
            "tools[0].function.parameters",
        ),
        ({"chat_template_kwargs": {"tools": []}}, "tools"),
    ],
)
def test_malformed_tools_are_bad_requests_naming_the_field(qwen3, inputs, named):
    assert named in bad_request(qwen3, {"messages": CONVERSATION[:1], **inputs})


def test_malformed_tool_calls_are_bad_requests_naming_the_message(qwen3):
    messages = [CONVERSATION[0], {"role": "assistant", "content": "", "tool_calls": [{"x": 1}]}]
    assert "messages[1].tool_calls[0]" in bad_request(qwen3, {"messages": messages})


def test_count_chat_tokens_is_the_prompt_length_tools_included(qwen3):
    inputs = chat(CONVERSATION, tools=[TOOL])
    count = count_chat_tokens(qwen3.tokenizer, inputs)
    assert count == len(chat_prompt_tokens(qwen3.tokenizer, inputs))
    assert count > count_chat_tokens(qwen3.tokenizer, chat(CONVERSATION))


def receiver_reply(tokenizer, args):
    outbox: queue.SimpleQueue = queue.SimpleQueue()
    receiver = Receiver(None, Handoff(), outbox, WorkerStats(model="m"))
    if tokenizer is not None:
        receiver.set_tokenizer(TokenizerCalls(tokenizer))
    receiver._on_control(ControlCall(7, ControlMethod.COUNT_TOKENS, args))
    return outbox.get_nowait()


def test_the_count_tokens_control_call_replies_input_tokens(qwen3):
    inputs = chat(CONVERSATION[:1])
    reply = receiver_reply(qwen3.tokenizer, inputs)
    assert reply.ok and reply.call_id == 7
    assert reply.input_tokens == len(chat_prompt_tokens(qwen3.tokenizer, inputs))


def test_count_tokens_of_malformed_inputs_replies_the_error(qwen3):
    reply = receiver_reply(qwen3.tokenizer, chat([]))
    assert not reply.ok and "messages" in reply.error


def test_count_tokens_on_a_model_that_does_not_count_replies_an_error():
    reply = receiver_reply(None, chat(CONVERSATION[:1]))
    assert not reply.ok and "does not count tokens" in reply.error


# -- a template that cannot render tools (worker/text/tool_fallback.py) --------------------


@pytest.fixture(scope="module")
def llama():  # the tiny llama's template never uses `tools`, like SmolLM2's
    return load_text_model(str(ensure_checkpoint("llama")))


@pytest.mark.parametrize("arch", ["qwen3", "qwen2", "llama", "qwen3_scripted"])
def test_every_template_family_sees_the_tools(arch):
    """prompt_tokens with tools is more than without, whether the template renders them or
    the fallback writes them into the messages: tools are never accepted and unseen."""
    model = load_text_model(str(ensure_checkpoint(arch)))
    plain = chat_prompt_tokens(model.tokenizer, chat(CONVERSATION[:1]))
    tooled = chat_prompt_tokens(model.tokenizer, chat(CONVERSATION[:1], tools=[TOOL]))
    assert len(tooled) > len(plain) + 20


def test_a_template_without_tools_gets_them_as_a_hermes_system_block(llama):
    from worker.text.tool_fallback import template_renders_tools

    assert not template_renders_tools(llama.tokenizer)
    text = prompt_text(llama, {"messages": CONVERSATION[:1], "tools": [TOOL]})
    assert "<tools>" in text and '"name": "get_weather"' in text and "<tool_call>" in text


def test_the_fallback_writes_earlier_calls_and_results_as_hermes_text(llama):
    text = prompt_text(
        llama,
        {"messages": [{"role": "system", "content": "Be brief."}, *CONVERSATION], "tools": [TOOL]},
    )
    assert text.index("Be brief.") < text.index("<tools>")  # one system turn, the block after
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}' in text
    assert "<tool_response>\n18 C, sunny\n</tool_response>" in text


def test_the_fallback_parses_hermes_calls(llama):
    from worker.text.features import build_features

    inputs = chat(CONVERSATION[:1], tools=[TOOL])
    prompt = chat_prompt_tokens(llama.tokenizer, inputs)
    parser = build_features(llama.tokenizer, inputs, prompt).parser
    delta = parser.feed('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n')
    tail, finish = parser.finish("stop")
    calls = [*delta.tool_calls, *tail.tool_calls]
    assert calls and calls[0].name == "get_weather" and finish == "tool_calls"
