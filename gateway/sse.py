"""Server-sent-event framing of OpenAI chat and text-completion streams.

This is the per-token hot path (its overhead is measured against direct mlx-lm), so each
encoder pre-renders the JSON that never changes in a stream (id, created, model) once and a
content chunk costs one `json.dumps` of the text plus a string join. One SSE write per engine
batch: the caller merges a batch's texts before calling `text()`.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from gateway.errors import APIError
from protocol.messages import Usage

SSE_DONE = b"data: [DONE]\n\n"
SSE_HEADERS = {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",  # keep reverse proxies from buffering the stream
}


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def sse_data(obj: Any) -> bytes:
    return f"data: {_dumps(obj)}\n\n".encode()


def sse_error(error: APIError) -> bytes:
    """The error event of a stream that already started, then its end."""
    return sse_data(error.body()) + SSE_DONE


def usage_dict(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }


class ChunkEncoder(Protocol):
    """What the streaming loop needs from an API's chunk format."""

    def start(self) -> bytes: ...

    def text(self, text: str) -> bytes: ...

    def finish(self, finish_reason: str, usage: Usage | None) -> bytes: ...


class _Chunks:
    """Shared framing: `{<head>,"choices":[<choice>]<usage tail>}` with a pre-rendered head."""

    def __init__(self, id: str, object: str, created: int, model: str, include_usage: bool):
        head = _dumps({"id": id, "object": object, "created": created, "model": model})
        self._prefix = "data: " + head[:-1] + ',"choices":['
        # OpenAI sends `"usage": null` on every chunk but the last when usage was asked for.
        self._suffix = ("]" + (',"usage":null' if include_usage else "") + "}\n\n").encode()
        self._include_usage = include_usage

    def _chunk(self, choice: str) -> bytes:
        return (self._prefix + choice).encode() + self._suffix

    def _usage(self, usage: Usage | None) -> bytes:
        if not self._include_usage:
            return b""
        value = _dumps(usage_dict(usage)) if usage is not None else "null"
        return (self._prefix + '],"usage":' + value + "}\n\n").encode()


class ChatChunks(_Chunks):
    """`chat.completion.chunk` events: a role chunk, content chunks, a finish chunk."""

    def __init__(self, id: str, created: int, model: str, include_usage: bool) -> None:
        super().__init__(id, "chat.completion.chunk", created, model, include_usage)

    def start(self) -> bytes:
        return self._chunk(
            '{"index":0,"delta":{"role":"assistant","content":""},'
            '"logprobs":null,"finish_reason":null}'
        )

    def text(self, text: str) -> bytes:
        return self._chunk(
            '{"index":0,"delta":{"content":'
            + _dumps(text)
            + '},"logprobs":null,"finish_reason":null}'
        )

    def finish(self, finish_reason: str, usage: Usage | None) -> bytes:
        choice = '{"index":0,"delta":{},"logprobs":null,"finish_reason":' + _dumps(finish_reason)
        return self._chunk(choice + "}") + self._usage(usage) + SSE_DONE


class CompletionChunks(_Chunks):
    """`text_completion` events of a streamed legacy completion."""

    def __init__(self, id: str, created: int, model: str, include_usage: bool) -> None:
        super().__init__(id, "text_completion", created, model, include_usage)

    def start(self) -> bytes:
        return b""

    def text(self, text: str) -> bytes:
        return self._chunk(
            '{"index":0,"text":' + _dumps(text) + ',"logprobs":null,"finish_reason":null}'
        )

    def finish(self, finish_reason: str, usage: Usage | None) -> bytes:
        choice = '{"index":0,"text":"","logprobs":null,"finish_reason":' + _dumps(finish_reason)
        return self._chunk(choice + "}") + self._usage(usage) + SSE_DONE
