"""Anthropic's streaming event sequence for one message (a `StreamEncoder`).

    message_start, ping,
    (content_block_start, content_block_delta*, content_block_stop)*   thinking, text, tool_use
    message_delta (stop_reason, usage), message_stop

Output kinds open and close blocks as they change: reasoning streams as `thinking_delta`s of
a thinking block (closed with a `signature_delta`, as Anthropic does), text as `text_delta`s,
and each tool call as a `tool_use` block whose arguments stream as `input_json_delta`s. A
failure after the start is an `error` event, which the anthropic SDK raises.
"""

from __future__ import annotations

from typing import Any

from gateway.api.anthropic_messages.message import stop_reason, thinking_block, usage_body
from gateway.generation.output import finish_reason_of, is_first_piece, new_call_id
from gateway.http.errors import APIError
from gateway.http.sse import sse_event
from protocol.messages import Delta, ToolCallDelta, Usage


def _event(obj: dict[str, Any]) -> bytes:
    return sse_event(obj["type"], obj)


_PING = _event({"type": "ping"})


class MessageEvents:
    keepalive = _PING  # Anthropic's own keepalive, which its SDKs skip

    def __init__(
        self,
        msg_id: str,
        model: str,
        omit_thinking: bool = False,
        context_management: dict[str, Any] | None = None,
    ) -> None:
        self._context_management = context_management  # the applied edits, when asked for
        self._msg_id = msg_id
        self._model = model
        self._omit_thinking = omit_thinking
        self._index = -1  # the open block's index; blocks are numbered from 0
        self._kind: str | None = None  # the open block's type
        self._calls: dict[int, int] = {}  # tool call index -> its block index
        self._finish = "stop"
        self._stop_sequence = ""

    def start(self, usage: Usage | None = None) -> bytes:
        message = {
            "id": self._msg_id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            # message_delta carries the totals in any case.
            "usage": usage_body(usage)
            if usage is not None
            else {"input_tokens": 0, "output_tokens": 0},
        }
        return _event({"type": "message_start", "message": message}) + _PING

    def delta(self, index: int, delta: Delta) -> bytes:
        parts = []
        if delta.reasoning:
            parts.append(self._open("thinking", thinking_block("")))
            if not self._omit_thinking:
                parts.append(self._delta({"type": "thinking_delta", "thinking": delta.reasoning}))
        if delta.text:
            parts.append(self._open("text", {"type": "text", "text": ""}))
            parts.append(self._delta({"type": "text_delta", "text": delta.text}))
        for piece in delta.tool_calls:
            parts.append(self._tool_piece(piece))
        return b"".join(parts)

    def _tool_piece(self, piece: ToolCallDelta) -> bytes:
        head = b""
        if is_first_piece(piece) or piece.index not in self._calls:
            block = {
                "type": "tool_use",
                "id": piece.id or new_call_id("toolu_"),
                "name": piece.name or "",
                "input": {},
            }
            head = self._close() + self._start("tool_use", block)
            self._calls[piece.index] = self._index
        if not piece.arguments:
            return head
        delta = {"type": "input_json_delta", "partial_json": piece.arguments}
        return head + self._delta(delta, self._calls[piece.index])

    def _open(self, kind: str, block: dict[str, Any]) -> bytes:
        if self._kind == kind:
            return b""
        return self._close() + self._start(kind, block)

    def _start(self, kind: str, block: dict[str, Any]) -> bytes:
        self._index += 1
        self._kind = kind
        return _event({"type": "content_block_start", "index": self._index, "content_block": block})

    def _delta(self, delta: dict[str, Any], index: int | None = None) -> bytes:
        block = self._index if index is None else index
        return _event({"type": "content_block_delta", "index": block, "delta": delta})

    def _close(self) -> bytes:
        if self._kind is None:
            return b""
        out = b""
        if self._kind == "thinking":
            out = self._delta({"type": "signature_delta", "signature": ""})
        self._kind = None
        return out + _event({"type": "content_block_stop", "index": self._index})

    def finish(self, index: int, terminal: Delta) -> bytes:
        self._finish = finish_reason_of(terminal.finish_reason or "stop", bool(self._calls))
        self._stop_sequence = terminal.stop_sequence
        return self._close()

    def end(self, usage: Usage) -> bytes:
        delta = {
            "stop_reason": stop_reason(self._finish, self._stop_sequence),
            "stop_sequence": self._stop_sequence or None,
        }
        event: dict[str, Any] = {
            "type": "message_delta",
            "delta": delta,
            "usage": usage_body(usage),
        }
        if self._context_management is not None:
            event["context_management"] = self._context_management
        return _event(event) + _event({"type": "message_stop"})

    def error(self, error: APIError) -> bytes:
        return _event(error.anthropic_body())
