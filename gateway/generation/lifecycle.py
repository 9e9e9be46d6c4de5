"""One generation request's life in the gateway: admission, collection or streaming, abort.

A request with `n` choices is `n` worker requests (one Submit each), read together.

A stream's life (headers only once every choice's first batch arrived, the API's error event
for a failure after that, abort on disconnect) is gateway/http/streaming.py's; this module turns the
choices' batches into one write each of the API's events (a `StreamEncoder`). Not streamed, a
`DisconnectWatcher` cancels the work when the client goes, which exits the engine's request
contexts and sends the worker its Aborts at once.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial
from typing import Any

from starlette.requests import Request

from gateway.generation.fan_in import Choices, Indexed
from gateway.generation.output import ChoiceOutput, total_usage
from gateway.generation.request import GenerationRequest
from gateway.http import errors
from gateway.http.disconnect import DisconnectWatcher
from gateway.http.sse import StreamEncoder, has_output
from gateway.http.streaming import (
    Ending,
    StreamedResponse,
    keepalive_for,
    open_stream,
    raise_early_error,
)
from gateway.media.resolve import MediaSettings, media_settings, resolve_media
from gateway.workers.protocol import EngineClient
from protocol.messages import Usage


@dataclass(slots=True)
class Generated:
    choices: list[ChoiceOutput]
    usage: Usage  # all choices together: the prompt once, completions summed


async def _enter_all(
    engine: EngineClient, req: GenerationRequest, stack: AsyncExitStack, media: MediaSettings
) -> list[Any]:
    """Fetch and check the request's media, then admit and submit every choice; leaving
    `stack` aborts the unfinished ones."""
    resolved = await resolve_media(req.media, media) if req.media else None
    return [
        await stack.enter_async_context(engine.request(inputs, req.stream))
        for inputs in req.choices(resolved)
    ]


# -- not streamed --------------------------------------------------------------------------


def check_max_tokens(engine: EngineClient, req: GenerationRequest) -> None:
    """A `max_tokens` the client set above the model's whole context is a 400 naming the
    limit, as OpenAI's and Anthropic's APIs answer; the server's default is clamped instead
    (to the room the prompt leaves, in the worker)."""
    ready = engine.ready_info
    limit = ready.text.max_context if ready is not None and ready.text is not None else None
    field, wanted = req.max_tokens_field, req.sampling.max_tokens
    if field is None or limit is None or wanted <= limit:
        return
    raise errors.APIError(
        400,
        f"`{field}` is {wanted}, more than this model's context of {limit} tokens (the "
        "prompt and the output share it)",
        param=field,
        code="invalid_value",
        anthropic_message=(
            f"max_tokens: {wanted} > {limit}, which is the maximum allowed number of output "
            f"tokens for {engine.model_name}"
        ),
    )


async def complete(request: Request, engine: EngineClient, req: GenerationRequest) -> Generated:
    """Run a request to its end; the client leaving cancels it (ClientDisconnected)."""
    check_max_tokens(engine, req)
    watcher = DisconnectWatcher(request.receive)
    try:
        choices = await watcher.run(_collect_all(engine, req, media_settings(request)))
    finally:
        watcher.close()
    return Generated(choices, total_usage([c.usage for c in choices]))


async def _collect_all(
    engine: EngineClient, req: GenerationRequest, media: MediaSettings
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
    request: Request, engine: EngineClient, req: GenerationRequest, encoder: StreamEncoder
) -> StreamedResponse[Indexed]:
    """Wait for every choice's first batch, then hand the open requests to an SSE response."""
    check_max_tokens(engine, req)
    enter = partial(_open, engine, req, media=media_settings(request))
    opened = await open_stream(request, enter, keepalive_for(request, encoder.keepalive))
    return StreamedResponse(opened, _Events(encoder, req.n).encode, encoder.error, "request")


async def _open(
    engine: EngineClient, req: GenerationRequest, stack: AsyncExitStack, media: MediaSettings
) -> tuple[Choices, Indexed]:
    streams = await _enter_all(engine, req, stack, media)
    iterators = [s.__aiter__() for s in streams]
    choices = Choices(iterators)
    stack.callback(choices.close)  # its reads are cancelled before the requests are left
    first: Indexed = []
    for index, iterator in enumerate(iterators):
        try:
            batch = await iterator.__anext__()
        except StopAsyncIteration:
            raise errors.no_terminal() from None
        first.extend((index, delta) for delta in batch)
    raise_early_error(delta for _, delta in first)
    return choices, first


class _Events:
    """The n choices' engine batches -> one write each of the API's events (`StreamEncoder`)."""

    def __init__(self, encoder: StreamEncoder, n: int) -> None:
        self._encoder = encoder
        self._started = False
        self._open = n
        self._usages: list[Usage | None] = []

    def encode(self, batch: Indexed) -> tuple[list[bytes], Ending]:
        """The batch's events in one write; True once every choice ended."""
        encoder = self._encoder
        parts = []
        if not self._started:
            self._started = True
            prompt = next((d.usage for _, d in batch if d.usage and d.finish_reason is None), None)
            parts.append(encoder.start(prompt))
        for index, delta in batch:  # each choice's deltas were merged by its RequestStream
            if has_output(delta):
                parts.append(encoder.delta(index, delta))
            if delta.finish_reason is None:
                continue
            error = errors.terminal_error(delta)
            if error is not None:
                return [b"".join(parts)], error
            parts.append(encoder.finish(index, delta))
            self._usages.append(delta.usage)
            self._open -= 1
            if self._open == 0:
                parts.append(encoder.end(total_usage(self._usages)))
                return [b"".join(parts)], True
        return [b"".join(parts)], False
