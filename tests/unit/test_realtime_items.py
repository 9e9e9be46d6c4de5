"""Realtime conversation items: what conversation.item.create takes, how items are written in
either interface, and the chat messages a response is generated from."""

from __future__ import annotations

import base64

import pytest

from gateway.api.realtime.items import Spoken, chat_messages, item_object, parse_item
from gateway.api.realtime.names import BETA, GA
from gateway.api.realtime.wire import EventError


def test_the_conversation_becomes_chat_messages_with_calls_of_a_turn_together():
    items = [
        parse_item({"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": "Time and weather?"}]}),
        parse_item({"type": "function_call", "call_id": "c1", "name": "time", "arguments": ""}),
        parse_item({"type": "function_call", "call_id": "c2", "name": "weather",
                    "arguments": '{"city": "Paris"}'}),
        parse_item({"type": "function_call_output", "call_id": "c1", "output": "12:00"}),
        parse_item({"type": "function_call_output", "call_id": "c2", "output": "sunny"}),
        parse_item({"type": "message", "role": "assistant",
                    "content": [{"type": "audio", "transcript": "Noon, and sunny."}]}),
    ]  # fmt: skip
    messages = chat_messages("Be brief.", items)
    assert messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Time and weather?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "time", "arguments": "{}"}},
            {"id": "c2", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
        {"role": "tool", "tool_call_id": "c2", "content": "sunny"},
        {"role": "assistant", "content": "Noon, and sunny."},
    ]  # fmt: skip


def test_an_audio_part_is_heard_as_its_transcript_and_written_per_interface():
    audio = base64.b64encode(b"\0\0" * 2400).decode()
    user = parse_item({"type": "message", "role": "user",
                       "content": [{"type": "input_audio", "audio": audio, "transcript": "Hi"}]})  # fmt: skip
    assert user.content[0].audio == b"\0\0" * 2400
    assert chat_messages("", [user]) == [{"role": "user", "content": "Hi"}]
    said = parse_item({"type": "message", "role": "assistant",
                       "content": [{"type": "output_audio", "transcript": "Hello."}]})  # fmt: skip
    assert item_object(said, GA)["content"] == [{"type": "output_audio", "transcript": "Hello."}]
    assert item_object(said, BETA)["content"] == [{"type": "audio", "transcript": "Hello."}]


def test_truncating_spoken_audio_keeps_the_phrases_that_began_before_the_cut():
    spoken = Spoken("One. Two. Three.", [(0, "One."), (800, "Two."), (1600, "Three.")], 2400)
    spoken.truncate(1000)
    assert (spoken.transcript, spoken.audio_ms) == ("One. Two.", 1000)


@pytest.mark.parametrize(
    ("item", "param"),
    [
        ({"type": "message", "role": "robot", "content": [{"type": "input_text"}]}, "item.role"),
        ({"type": "message", "role": "user", "content": []}, "item.content"),
        ({"type": "message", "role": "user", "content": [{"type": "output_text", "text": "x"}]},
         "item.content[0].type"),
        ({"type": "message", "role": "user", "content": [{"type": "input_audio", "audio": "A"}]},
         "item.content[0].audio"),
        ({"type": "function_call_output", "output": "x"}, "item.call_id"),
        ({"type": "image"}, "item.type"),
    ],
)  # fmt: skip
def test_items_that_cannot_be_added_are_refused_by_name(item, param):
    with pytest.raises(EventError) as error:
        parse_item(item)
    assert error.value.param == param
