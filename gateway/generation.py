"""One generation request's life in the gateway: admission, collection or streaming, abort.

Why streaming needs care: HTTP headers are not sent until the engine's first batch arrived (the
worker's "accepted" delta, or an error), so everything that can fail early (queue full, engine
down, a prompt the worker rejects) still becomes a proper HTTP status with error JSON. Once the
200 and the first chunk went out, an error can only be an SSE error event followed by
`data: [DONE]`. Throughout, a `DisconnectWatcher` cancels the work when the client goes, which
exits the engine's request context and sends the worker its Abort at once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway import errors
from gateway.disconnect import ClientDisconnected, DisconnectWatcher
from gateway.engine import EngineUnavailable
from gateway.openai_requests import GenerationRequest
from gateway.sse import SSE_HEADERS, ChunkEncoder, sse_error
from protocol.messages import Delta, FinishReason, Usage

log = logging.getLogger(__name__)

Batches = AsyncIterator[list[Delta]]
_HEADERS = [(k.encode(), v.encode()) for k, v in SSE_HEADERS.items()]
_NORMAL_ENDS = (FinishReason.STOP, FinishReason.LENGTH)


@dataclass(slots=True)
class Completion:
    text: str
    finish_reason: str
    usage: Usage


def _terminal_error(delta: Delta) -> errors.APIError | None:
    """The client-facing error a terminal delta stands for; None for stop / length."""
    if delta.finish_reason in _NORMAL_ENDS:
        return None
    if delta.finish_reason == FinishReason.ABORT:
        return errors.aborted()
    return errors.worker_error(delta.error)


def _as_api_error(exc: BaseException) -> errors.APIError:
    if isinstance(exc, errors.APIError):
        return exc
    if isinstance(exc, EngineUnavailable):
        return errors.engine_unavailable(exc)
    log.error("generation failed mid-stream", exc_info=exc)
    return errors.APIError(500, "Internal server error", type=errors.SERVER_ERROR, code="internal")


def _no_terminal() -> errors.APIError:
    return errors.APIError(
        500, "The request ended without a result", type=errors.SERVER_ERROR, code="internal"
    )


async def complete(request: Request, engine: Any, req: GenerationRequest) -> Completion:
    """Run a non-streamed request to its end; the client leaving cancels it (ClientDisconnected)."""
    watcher = DisconnectWatcher(request.receive)
    try:
        texts, terminal = await watcher.run(_collect(engine, req))
    finally:
        watcher.close()
    if terminal is None:
        raise _no_terminal()
    error = _terminal_error(terminal)
    if error is not None:
        raise error
    usage = terminal.usage or Usage(0, 0)
    return Completion("".join(texts), terminal.finish_reason or FinishReason.STOP, usage)


async def _collect(engine: Any, req: GenerationRequest) -> tuple[list[str], Delta | None]:
    texts: list[str] = []
    async with engine.request(req.op, req.inputs, req.sampling, req.stream) as batches:
        async for batch in batches:
            for delta in batch:
                if delta.text:
                    texts.append(delta.text)
                if delta.finish_reason is not None:
                    return texts, delta
    return texts, None


async def stream(
    request: Request, engine: Any, req: GenerationRequest, encoder: ChunkEncoder
) -> Response:
    """Wait for the first batch, then hand the open request to an SSE response."""
    watcher = DisconnectWatcher(request.receive)
    stack = AsyncExitStack()
    try:
        batches, first = await watcher.run(_open(engine, req, stack))
        terminal = next((d for d in first if d.finish_reason is not None), None)
        error = _terminal_error(terminal) if terminal is not None else None
        if error is not None:
            raise error
    except BaseException:
        await stack.aclose()
        watcher.close()
        raise
    return EventStream(stack, watcher, batches, first, encoder)


async def _open(engine: Any, req: GenerationRequest, stack: AsyncExitStack) -> tuple[Batches, list]:
    batches = await stack.enter_async_context(
        engine.request(req.op, req.inputs, req.sampling, req.stream)
    )
    iterator = batches.__aiter__()
    try:
        first = await iterator.__anext__()
    except StopAsyncIteration:
        await stack.aclose()
        raise _no_terminal() from None
    except BaseException:
        await stack.aclose()  # leaving the context before the terminal delta aborts the request
        raise
    return iterator, first


class EventStream(Response):
    """An SSE response that owns an open engine request until its terminal delta or a disconnect."""

    def __init__(
        self,
        stack: AsyncExitStack,
        watcher: DisconnectWatcher,
        batches: Batches,
        first: list[Delta],
        encoder: ChunkEncoder,
    ) -> None:
        self.status_code = 200
        self.background = None
        self.raw_headers = list(_HEADERS)
        self._stack = stack
        self._watcher = watcher
        self._batches = batches
        self._first = first
        self._encoder = encoder

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._watcher.run(self._pump(send))
        except ClientDisconnected:
            pass
        finally:
            self._watcher.close()
            await self._stack.aclose()

    async def _pump(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        encoder = self._encoder
        body, done = self._encode(self._first, encoder.start())
        try:
            if body:
                await send({"type": "http.response.body", "body": body, "more_body": True})
            if not done:
                async for batch in self._batches:
                    body, done = self._encode(batch, b"")
                    if body:
                        await send({"type": "http.response.body", "body": body, "more_body": True})
                    if done:
                        break
                else:
                    body = sse_error(_no_terminal())
                    await send({"type": "http.response.body", "body": body, "more_body": True})
        except Exception as exc:  # after the 200 went out, errors can only travel in-band
            body = sse_error(_as_api_error(exc))
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _encode(self, batch: list[Delta], head: bytes) -> tuple[bytes, bool]:
        """One write for a whole batch: merged text, then the end of the stream if it ended."""
        if len(batch) == 1:
            delta = batch[0]
            text, terminal = delta.text, (delta if delta.finish_reason is not None else None)
        else:
            text = "".join(d.text for d in batch)
            terminal = next((d for d in batch if d.finish_reason is not None), None)
        if text:
            head += self._encoder.text(text)
        if terminal is None:
            return head, False
        error = _terminal_error(terminal)
        if error is not None:
            return head + sse_error(error), True
        return head + self._encoder.finish(terminal.finish_reason, terminal.usage), True
