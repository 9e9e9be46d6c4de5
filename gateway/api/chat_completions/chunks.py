"""OpenAI stream encoders: `chat.completion.chunk` and `text_completion` events.

This is the per-token hot path (its overhead is measured against direct mlx-lm), so the JSON
that never changes in a stream (id, created, model) is rendered once, and a plain text chunk
costs one `json.dumps` of the text plus a string join. Anything richer (reasoning, tool-call
pieces, logprobs) goes through a dict. Tool calls stream as OpenAI's `tool_calls` deltas: the
call's first piece carries index, id, type and name, later pieces only argument text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from msgspec.structs import replace

from gateway.generation.logprobs import chat_logprobs, completion_logprobs
from gateway.generation.output import finish_reason_of, is_first_piece, new_call_id
from gateway.http.errors import APIError
from gateway.http.sse import SSE_COMMENT, SSE_DONE, dumps, sse_error
from protocol.messages import Delta, ToolCallDelta, Usage


def usage_dict(usage: Usage, transcribed_audio_parts: int = 0) -> dict[str, Any]:
    """OpenAI's usage object; audio parts heard by the served recognizer (an extension) are
    counted in `prompt_tokens_details.transcribed_audio_parts` when there were any."""
    prompt_details: dict[str, Any] = {"cached_tokens": usage.cached_tokens}
    if transcribed_audio_parts:
        prompt_details["transcribed_audio_parts"] = transcribed_audio_parts
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": prompt_details,
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


class _Chunks:
    """Shared framing: `{<head>,"choices":[<choice>]<usage tail>}` with a pre-rendered head."""

    keepalive = SSE_COMMENT

    def __init__(
        self, id: str, object: str, created: int, model: str, include_usage: bool, n: int
    ) -> None:
        head = dumps({"id": id, "object": object, "created": created, "model": model})
        self._prefix = "data: " + head[:-1] + ',"choices":['
        # OpenAI sends `"usage": null` on every chunk but the last when usage was asked for.
        self._suffix = ("]" + (',"usage":null' if include_usage else "") + "}\n\n").encode()
        self._include_usage = include_usage
        self._n = n
        self.transcribed_audio_parts = 0  # usage_dict's

    def _chunk(self, choice: str) -> bytes:
        return (self._prefix + choice).encode() + self._suffix

    def end(self, usage: Usage) -> bytes:
        if not self._include_usage:
            return SSE_DONE
        tail = '],"usage":' + dumps(usage_dict(usage, self.transcribed_audio_parts)) + "}\n\n"
        return (self._prefix + tail).encode() + SSE_DONE

    def error(self, error: APIError) -> bytes:
        return sse_error(error)


class ChatChunks(_Chunks):
    """`chat.completion.chunk` events: a role chunk per choice, output chunks, finish chunks."""

    def __init__(self, id: str, created: int, model: str, include_usage: bool, n: int = 1) -> None:
        super().__init__(id, "chat.completion.chunk", created, model, include_usage, n)
        self._called = [False] * n  # whether choice i called a tool (its finish reason)
        self._ids: dict[tuple[int, int], str] = {}
        # Calls the client must not see (MCP tools the gateway runs: gateway/api/
        # chat_completions/mcp.py), by name; per round, the (choice, call index) pieces that are
        # theirs and the index each call the client sees gets (its calls numbered from 0).
        self.hidden: Callable[[str], bool] | None = None
        self._hidden: set[tuple[int, int]] = set()
        self._visible: dict[tuple[int, int], int] = {}

    def start(self, usage: Usage | None = None) -> bytes:
        return b"".join(
            self._chunk(
                '{"index":'
                + str(i)
                + ',"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}'
            )
            for i in range(self._n)
        )

    def delta(self, index: int, delta: Delta) -> bytes:
        if self.hidden is not None and delta.tool_calls:
            delta = self._without_hidden(index, delta)
            if not (delta.text or delta.reasoning or delta.tool_calls or delta.logprobs):
                return b""
        if not (delta.reasoning or delta.tool_calls or delta.logprobs):
            return self._chunk(
                '{"index":'
                + str(index)
                + ',"delta":{"content":'
                + dumps(delta.text)
                + '},"logprobs":null,"finish_reason":null}'
            )
        body: dict[str, Any] = {}
        if delta.reasoning:
            body["reasoning_content"] = delta.reasoning
        if delta.text:
            body["content"] = delta.text
        if delta.tool_calls:
            self._called[index] = True
            body["tool_calls"] = [self._tool_call(index, piece) for piece in delta.tool_calls]
        choice = {
            "index": index,
            "delta": body,
            "logprobs": chat_logprobs(delta.logprobs) if delta.logprobs else None,
            "finish_reason": None,
        }
        return self._chunk(dumps(choice))

    def new_round(self) -> None:
        """A new round of generation begins: its calls are numbered afresh (from 0)."""
        self._hidden.clear()
        self._visible.clear()

    def _without_hidden(self, index: int, delta: Delta) -> Delta:
        """The delta without the hidden calls' pieces, the others renumbered in order."""
        assert self.hidden is not None
        kept = []
        for piece in delta.tool_calls:
            key = (index, piece.index)
            if is_first_piece(piece) and key not in self._visible and key not in self._hidden:
                if piece.name and self.hidden(piece.name):
                    self._hidden.add(key)
                else:
                    self._visible[key] = sum(1 for k in self._visible if k[0] == index)
            if key in self._visible:
                kept.append(replace(piece, index=self._visible[key]))
        return replace(delta, tool_calls=kept)

    def extension(self, name: str, value: Any) -> bytes:
        """A chunk with no choices and one extension field (the MCP items)."""
        return (self._prefix + '],"' + name + '":' + dumps(value) + "}\n\n").encode()

    def _tool_call(self, index: int, piece: ToolCallDelta) -> dict[str, Any]:
        if not is_first_piece(piece):
            return {"index": piece.index, "function": {"arguments": piece.arguments}}
        call_id = self._ids.setdefault((index, piece.index), piece.id or new_call_id())
        return {
            "index": piece.index,
            "id": call_id,
            "type": "function",
            "function": {"name": piece.name or "", "arguments": piece.arguments},
        }

    def finish(self, index: int, terminal: Delta) -> bytes:
        reason = finish_reason_of(terminal.finish_reason or "stop", self._called[index])
        return self._chunk(
            '{"index":'
            + str(index)
            + ',"delta":{},"logprobs":null,"finish_reason":'
            + dumps(reason)
            + "}"
        )


class CompletionChunks(_Chunks):
    """`text_completion` events of a streamed legacy completion (echo and logprobs included)."""

    def __init__(
        self,
        id: str,
        created: int,
        model: str,
        include_usage: bool,
        n: int = 1,
        echo: str | None = None,
    ) -> None:
        super().__init__(id, "text_completion", created, model, include_usage, n)
        self._echo = echo
        self._offsets = [len(echo or "")] * n  # text_offset of each choice's next token

    def start(self, usage: Usage | None = None) -> bytes:
        if not self._echo:
            return b""
        return b"".join(self._text_chunk(i, self._echo, "null") for i in range(self._n))

    def _text_chunk(self, index: int, text: str, logprobs: str) -> bytes:
        return self._chunk(
            '{"index":'
            + str(index)
            + ',"text":'
            + dumps(text)
            + ',"logprobs":'
            + logprobs
            + ',"finish_reason":null}'
        )

    def delta(self, index: int, delta: Delta) -> bytes:
        logprobs = "null"
        if delta.logprobs:
            value, self._offsets[index] = completion_logprobs(delta.logprobs, self._offsets[index])
            logprobs = dumps(value)
        return self._text_chunk(index, delta.text, logprobs)

    def finish(self, index: int, terminal: Delta) -> bytes:
        reason = dumps(terminal.finish_reason or "stop")
        return self._chunk(
            '{"index":' + str(index) + ',"text":"","logprobs":null,"finish_reason":' + reason + "}"
        )
