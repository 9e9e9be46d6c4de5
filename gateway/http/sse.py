"""Server-sent-event framing and the interface every API's stream encoder implements.

A generation stream (gateway/generation/lifecycle.py over gateway/http/streaming.py) drives a
`StreamEncoder`: it hands it each choice's output as it arrives (one merged delta per choice
and engine batch) and the ends, and writes the bytes it returns, one HTTP write per engine
batch. The encoders live with their API: OpenAI chunks in `openai_chunks`, Anthropic events in
`anthropic/events`, Responses events in `responses/events`. JSON is dumped compactly and
without ASCII escaping (the hot path).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from gateway.http.errors import APIError
from protocol.messages import Delta, Usage

SSE_DONE = b"data: [DONE]\n\n"
SSE_COMMENT = b": keepalive\n\n"  # what a silent stream writes every few seconds
SSE_HEADERS = {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",  # keep reverse proxies from buffering the stream
}


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def sse_data(obj: Any) -> bytes:
    return f"data: {dumps(obj)}\n\n".encode()


def sse_event(name: str, obj: Any) -> bytes:
    """A named event (`event: NAME` + `data: JSON`), as Anthropic and the Responses API frame them."""
    return f"event: {name}\ndata: {dumps(obj)}\n\n".encode()


def sse_error(error: APIError) -> bytes:
    """OpenAI's error event of a stream that already started, then its end."""
    return sse_data(error.body()) + SSE_DONE


def has_output(delta: Delta) -> bool:
    return bool(delta.text or delta.reasoning or delta.tool_calls or delta.logprobs or delta.audio)


class StreamEncoder(Protocol):
    """One API's streaming format. Every method returns the bytes to write (maybe none)."""

    keepalive: bytes  # written while the stream waits (the queue, a long prefill)

    def start(self, usage: Usage | None) -> bytes:
        """Before any output: e.g. OpenAI's role chunk, Anthropic's message_start. `usage` is
        the prompt's, when the worker reported it before generating (else None)."""
        ...

    def delta(self, index: int, delta: Delta) -> bytes:
        """Output of choice `index`: its text, reasoning, tool-call pieces, logprobs."""
        ...

    def finish(self, index: int, terminal: Delta) -> bytes:
        """Choice `index` ended normally (stop, length, tool_calls); its output came before."""
        ...

    def end(self, usage: Usage) -> bytes:
        """Every choice ended normally: the closing events (usage, [DONE], message_stop, ...)."""
        ...

    def error(self, error: APIError) -> bytes:
        """A failure after the stream started: the API's error event; the stream ends after."""
        ...
