"""Chat chunks with hidden calls (MCP tools the gateway runs, gateway/api/chat_completions/
mcp.py): their pieces never reach the client, and the calls it sees are numbered from 0 in
each round, as the non-streamed message numbers them."""

from __future__ import annotations

import json

from gateway.api.chat_completions.chunks import ChatChunks
from protocol.messages import Delta, FinishReason, ToolCallDelta


def calls_of(data: bytes) -> list[dict]:
    if not data:
        return []
    chunk = json.loads(data.decode().removeprefix("data: "))
    return chunk["choices"][0]["delta"].get("tool_calls") or []


def piece(index: int, name: str | None = None, arguments: str = "") -> Delta:
    call = ToolCallDelta(index, id=f"c{index}" if name else None, name=name, arguments=arguments)
    return Delta(request_id="r", tool_calls=[call])


def test_hidden_calls_are_left_out_and_the_others_numbered_from_zero():
    chunks = ChatChunks("id", 0, "m", False)
    chunks.hidden = lambda name: name == "llm_time"
    chunks.new_round()
    assert calls_of(chunks.delta(0, piece(0, "llm_time", "{"))) == []
    assert calls_of(chunks.delta(0, piece(0, arguments="}"))) == []
    shown = calls_of(chunks.delta(0, piece(1, "get_weather", '{"city"')))
    assert [(c["index"], c["function"]["name"]) for c in shown] == [(0, "get_weather")]
    assert calls_of(chunks.delta(0, piece(1, arguments=': "Paris"}'))) == [
        {"index": 0, "function": {"arguments": ': "Paris"}'}}
    ]
    finish = json.loads(chunks.finish(0, Delta(request_id="r", finish_reason=FinishReason.STOP))
                        .decode().removeprefix("data: "))  # fmt: skip
    assert finish["choices"][0]["finish_reason"] == "tool_calls"


def test_a_later_rounds_call_at_an_index_an_earlier_hidden_call_had_is_shown():
    chunks = ChatChunks("id", 0, "m", False)
    chunks.hidden = lambda name: name == "llm_time"
    chunks.new_round()
    assert calls_of(chunks.delta(0, piece(0, "llm_time", "{}"))) == []
    chunks.new_round()  # the MCP result went back to the model; its next round calls ours
    shown = calls_of(chunks.delta(0, piece(0, "get_weather", "{}")))
    assert [(c["index"], c["function"]["name"]) for c in shown] == [(0, "get_weather")]
