"""One generation request's life in the gateway: admission, collection or streaming, abort.

A request with `n` choices is `n` worker requests (one Submit each), read together.

Why streaming needs care: HTTP headers are not sent until every choice's first batch arrived
(the worker's "accepted" delta, or an error), so everything that can fail early (queue full,
engine down, a prompt or a schema the worker rejects) still becomes a proper HTTP status with
error JSON. Once the 200 went out, an error can only be the API's own error event, after which
the stream ends. Throughout, a `DisconnectWatcher` cancels the work when the client goes, which
exits the engine's request contexts and sends the worker its Aborts at once.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway import errors
from gateway.disconnect import ClientDisconnected, DisconnectWatcher
from gateway.fan_in import Choices, Indexed
from gateway.generation_request import GenerationRequest
from gateway.media.resolve import MediaSettings, media_settings, resolve_media
from gateway.output import ChoiceOutput, total_usage
from gateway.request_stream import merge_into, mergeable
from gateway.sse import SSE_HEADERS, StreamEncoder, has_output
from protocol.messages import Delta, ToolCallDelta, Usage

log = logging.getLogger(__name__)

_HEADERS = [(k.encode(), v.encode()) for k, v in SSE_HEADERS.items()]


@dataclass(slots=True)
class Generated:
    choices: list[ChoiceOutput]
    usage: Usage  # all choices together: the prompt once, completions summed


async def _enter_all(
    engine: Any, req: GenerationRequest, stack: AsyncExitStack, media: MediaSettings
) -> list[Any]:
    """Fetch and check the request's media, then admit and submit every choice; leaving
    `stack` aborts the unfinished ones."""
    inputs = req.inputs
    if req.media:
        inputs = {**inputs, **await resolve_media(req.media, media)}
    return [
        await stack.enter_async_context(engine.request(req.op, inputs, sampling, req.stream))
        for sampling in req.samplings()
    ]


# -- not streamed --------------------------------------------------------------------------


async def complete(request: Request, engine: Any, req: GenerationRequest) -> Generated:
    """Run a request to its end; the client leaving cancels it (ClientDisconnected)."""
    watcher = DisconnectWatcher(request.receive)
    try:
        choices = await watcher.run(_collect_all(engine, req, media_settings(request)))
    finally:
        watcher.close()
    return Generated(choices, total_usage([c.usage for c in choices]))


async def _collect_all(
    engine: Any, req: GenerationRequest, media: MediaSettings
) -> list[ChoiceOutput]:
    async with AsyncExitStack() as stack:
        streams = await _enter_all(engine, req, stack, media)
        if len(streams) == 1:
            return [await _collect(streams[0], 0)]
        return await _first_failure_cancels_all(
            [asyncio.ensure_future(_collect(s, i)) for i, s in enumerate(streams)]
        )


async def _first_failure_cancels_all(
    tasks: list[asyncio.Future[ChoiceOutput]],
) -> list[ChoiceOutput]:
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            task.cancel()
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    return [task.result() for task in tasks]


async def _collect(batches: Any, index: int) -> ChoiceOutput:
    """One choice's output; its error, if it ended in one, raised as the HTTP error."""
    output = ChoiceOutput(index)
    async for batch in batches:
        for delta in batch:
            output.add(delta)
            if delta.finish_reason is not None:
                error = errors.terminal_error(delta)
                if error is not None:
                    raise error
                return output
    raise errors.no_terminal()


# -- streamed ------------------------------------------------------------------------------


async def stream(
    request: Request, engine: Any, req: GenerationRequest, encoder: StreamEncoder
) -> Response:
    """Wait for every choice's first batch, then hand the open request to an SSE response."""
    watcher = DisconnectWatcher(request.receive)
    stack = AsyncExitStack()
    try:
        choices, first = await watcher.run(_open(engine, req, stack, media_settings(request)))
        for _, delta in first:
            error = errors.terminal_error(delta) if delta.finish_reason is not None else None
            if error is not None:
                raise error
    except BaseException:
        await stack.aclose()
        watcher.close()
        raise
    return EventStream(stack, watcher, choices, first, encoder, req.n)


async def _open(
    engine: Any, req: GenerationRequest, stack: AsyncExitStack, media: MediaSettings
) -> tuple[Choices, Indexed]:
    try:
        streams = await _enter_all(engine, req, stack, media)
        iterators = [s.__aiter__() for s in streams]
        first: Indexed = []
        for index, iterator in enumerate(iterators):
            try:
                batch = await iterator.__anext__()
            except StopAsyncIteration:
                raise errors.no_terminal() from None
            first.extend((index, delta) for delta in batch)
    except BaseException:
        await stack.aclose()  # leaving the contexts before the terminal deltas aborts them
        raise
    return Choices(iterators), first


def _copy(delta: Delta) -> Delta:
    """A delta merge_into may extend without touching the original (which may be shared)."""
    return replace(
        delta,
        token_ids=list(delta.token_ids),
        tool_calls=[ToolCallDelta(p.index, p.id, p.name, p.arguments) for p in delta.tool_calls],
        logprobs=None if delta.logprobs is None else list(delta.logprobs),
        segments=list(delta.segments),
    )


def coalesce(batch: Indexed) -> Indexed:
    """Consecutive mergeable deltas of one choice become one, so a batch is one write each."""
    if len(batch) < 2:
        return batch
    out: Indexed = []
    copied = False
    for index, delta in batch:
        if out and out[-1][0] == index and mergeable(out[-1][1], delta):
            if not copied:
                out[-1] = (index, _copy(out[-1][1]))
                copied = True
            merge_into(out[-1][1], delta)
        else:
            out.append((index, delta))
            copied = False
    return out


class EventStream(Response):
    """An SSE response that owns the open engine requests until their terminal deltas or a
    disconnect."""

    def __init__(
        self,
        stack: AsyncExitStack,
        watcher: DisconnectWatcher,
        choices: Choices,
        first: Indexed,
        encoder: StreamEncoder,
        n: int,
    ) -> None:
        self.status_code = 200
        self.background = None
        self.raw_headers = list(_HEADERS)
        self._stack = stack
        self._watcher = watcher
        self._choices = choices
        self._first = first
        self._encoder = encoder
        self._open = n
        self._usages: list[Usage | None] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._watcher.run(self._pump(send))
        except ClientDisconnected:
            pass
        finally:
            self._watcher.close()
            self._choices.close()
            await self._stack.aclose()

    async def _pump(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        encoder = self._encoder
        try:
            prompt = next(
                (d.usage for _, d in self._first if d.usage and d.finish_reason is None), None
            )
            body, done = self._encode(self._first, encoder.start(prompt))
            if body:
                await send({"type": "http.response.body", "body": body, "more_body": True})
            if not done:
                async for batch in self._choices:
                    body, done = self._encode(batch, b"")
                    if body:
                        await send({"type": "http.response.body", "body": body, "more_body": True})
                    if done:
                        break
                else:
                    body = encoder.error(errors.no_terminal())
                    await send({"type": "http.response.body", "body": body, "more_body": True})
        except Exception as exc:  # after the 200 went out, errors can only travel in-band
            body = encoder.error(errors.as_api_error(exc, log, "generation"))
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _encode(self, batch: Indexed, head: bytes) -> tuple[bytes, bool]:
        """One write for a whole batch; True once the stream is over."""
        parts = [head]
        encoder = self._encoder
        for index, delta in coalesce(batch):
            if has_output(delta):
                parts.append(encoder.delta(index, delta))
            if delta.finish_reason is None:
                continue
            error = errors.terminal_error(delta)
            if error is not None:
                parts.append(encoder.error(error))
                return b"".join(parts), True
            parts.append(encoder.finish(index, delta))
            self._usages.append(delta.usage)
            self._open -= 1
            if self._open == 0:
                parts.append(encoder.end(total_usage(self._usages)))
                return b"".join(parts), True
        return b"".join(parts), False
