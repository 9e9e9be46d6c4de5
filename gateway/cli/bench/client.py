"""One streamed request against an OpenAI-compatible server, timed from the client's side.

Timestamps are `time.perf_counter()` when bytes arrive: TTFT is the first chunk that carries
text, inter-token latencies are the gaps between text-bearing chunks, end-to-end ends at the
close of the stream. A server may merge several tokens into one chunk, so token counts come
from the final `usage` (asked for with `stream_options.include_usage`) and fall back to one
token per text chunk only when the server reports none.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from gateway.cli.bench.sse import SSEParser

ENDPOINTS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


@dataclass
class RequestResult:
    """What one request measured; times in seconds, relative to when it was sent."""

    start: float  # perf_counter() when the request was sent
    end: float = 0.0  # perf_counter() when the stream closed
    ttft: float | None = None
    token_times: list[float] = field(default_factory=list)  # arrival of each text chunk
    text: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int = 0
    tokens_from_usage: bool = False
    finish_reason: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def e2e(self) -> float:
        return self.end - self.start

    @property
    def itl(self) -> list[float]:
        times = self.token_times
        return [b - a for a, b in zip(times[:-1], times[1:], strict=True)]

    @property
    def decode_tok_s(self) -> float | None:
        """Tokens after the first over the time from the first text chunk to the last."""
        if len(self.token_times) < 2 or self.completion_tokens < 2:
            return None
        span = self.token_times[-1] - self.token_times[0]
        return (self.completion_tokens - 1) / span if span > 0 else None


def request_body(
    endpoint: str, model: str, prompt: str | list[dict[str, str]], max_tokens: int
) -> dict[str, Any]:
    """A greedy streamed request of exactly `max_tokens` (the bench checkpoints never stop)."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    body["messages" if endpoint == "chat" else "prompt"] = prompt
    return body


def _chunk_text(choice: dict[str, Any]) -> str:
    """The text a streamed choice carries: completion text, or chat content / reasoning."""
    if "text" in choice:
        return choice["text"] or ""
    delta = choice.get("delta") or {}
    return "".join(delta.get(key) or "" for key in ("reasoning_content", "reasoning", "content"))


def _apply_event(result: RequestResult, event: Any, now: float) -> None:
    if not isinstance(event, dict):
        return
    if "error" in event:
        error = event["error"]
        result.error = error.get("message", str(error)) if isinstance(error, dict) else str(error)
        return
    usage = event.get("usage")
    if isinstance(usage, dict):
        result.prompt_tokens = usage.get("prompt_tokens")
        if usage.get("completion_tokens") is not None:
            result.completion_tokens = usage["completion_tokens"]
            result.tokens_from_usage = True
    for choice in event.get("choices") or []:
        piece = _chunk_text(choice)
        if piece:
            if result.ttft is None:
                result.ttft = now - result.start
            result.token_times.append(now - result.start)
            result.text += piece
        if choice.get("finish_reason"):
            result.finish_reason = choice["finish_reason"]


async def stream_request(
    client: httpx.AsyncClient, endpoint: str, body: dict[str, Any]
) -> RequestResult:
    """Send one streamed request and time it; failures are recorded, never raised."""
    result = RequestResult(start=time.perf_counter())
    try:
        async with client.stream("POST", ENDPOINTS[endpoint], json=body) as response:
            if response.status_code != 200:
                content = (await response.aread()).decode(errors="replace")
                result.error = f"HTTP {response.status_code}: {content[:300]}"
                return result
            parser = SSEParser()
            done = False
            async for chunk in response.aiter_bytes():
                now = time.perf_counter()
                for data in parser.feed(chunk):
                    if data.strip() == "[DONE]":
                        done = True
                    else:
                        _apply_event(result, json.loads(data), now)
            for data in parser.close():
                if data.strip() == "[DONE]":
                    done = True
            if result.error is None and not done:
                result.error = "the stream ended without [DONE]"
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        result.end = time.perf_counter()
    if not result.tokens_from_usage:
        result.completion_tokens = len(result.token_times)
    return result


async def first_model_id(client: httpx.AsyncClient) -> str:
    """The first id `GET /v1/models` lists (what `--model auto` means)."""
    response = await client.get("/v1/models")
    response.raise_for_status()
    models = response.json().get("data") or []
    if not models:
        raise RuntimeError("the server lists no models")
    return models[0]["id"]
