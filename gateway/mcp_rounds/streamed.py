"""A streamed response whose writes come from MCP rounds (gateway/mcp_rounds/rounds.py)
running in a task of their own: the MCP SDK's connections must open and close in one task, so
the rounds queue each write and the response reads the queue. The client leaving cancels the
task, which aborts the round's worker request and stops the MCP servers. A failure after the
stream started is the API's error event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.requests import Request

from gateway.generation import lifecycle
from gateway.generation.output import ChoiceOutput
from gateway.generation.request import GenerationRequest
from gateway.http import errors
from gateway.http.errors import APIError
from gateway.http.sse import has_output
from gateway.http.streaming import Ending, StreamedResponse, keepalive_for, open_stream
from gateway.mcp_rounds.rounds import McpRounds
from gateway.workers.protocol import EngineClient
from protocol.messages import Delta

log = logging.getLogger(__name__)
T = TypeVar("T")

Write = tuple[list[bytes], Ending]


class QueuedWrites:
    """The writes the rounds make, in order."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Write] = asyncio.Queue()

    def emit(self, data: bytes) -> None:
        if data:
            self.queue.put_nowait(([data], False))


async def streamed_round(
    engine: EngineClient, req: GenerationRequest, on_output: Callable[[Delta], None], what: str
) -> StreamedOutput:
    """One round, generated streamed (its media already in its inputs: McpRounds.run): each
    delta with output goes to `on_output` as it comes; the round's output, ended by its
    terminal delta (an error one raised as the API's error)."""
    lifecycle.check_max_tokens(engine, req)
    output = StreamedOutput()
    async with engine.request(req.inputs, True) as batches:
        async for batch in batches:
            for delta in batch:
                output.add(delta)
                if has_output(delta):
                    on_output(delta)
                if delta.finish_reason is None:
                    continue
                error = errors.terminal_error(delta)
                if error is not None:
                    raise error
                output.terminal = delta
                return output
    raise errors.no_terminal(what)


@dataclass(slots=True)
class StreamedOutput(ChoiceOutput):
    """A round's output and the terminal delta that ended it."""

    terminal: Delta | None = None


class StreamedRounds(McpRounds):
    """Rounds whose output streams: each round's deltas are written as they come (the API's
    `_on_output`), and the MCP work between the rounds is not watched on its own: the streamed
    response's watcher cancels the rounds' task when the client leaves."""

    what = "request"  # the stream's name in errors

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.writes = QueuedWrites()

    async def _generate(self, req: GenerationRequest) -> ChoiceOutput:
        output = await streamed_round(self._engine, req, self._on_output, self.what)
        self._on_round_end(output)
        return output

    def _on_output(self, delta: Delta) -> None:
        """Write a delta with output, in the API's events."""
        raise NotImplementedError

    def _on_round_end(self, output: StreamedOutput) -> None:
        """A round ended (`output.terminal`: its terminal delta)."""

    async def _watched(self, work: Awaitable[T]) -> T:
        return await work


async def stream_rounds(
    request: Request,
    writes: QueuedWrites,
    run: Callable[[], Awaitable[bytes]],
    first: bytes,
    keepalive: bytes,
    error: Callable[[APIError], bytes],
    what: str,
) -> StreamedResponse[Write]:
    """Stream `first`, then what `run` (the rounds) emits into `writes`, then the bytes `run`
    returns, which end the stream. `what` names the stream in errors ("response", "request")."""
    queue = writes.queue

    async def produce() -> None:
        try:
            last = await run()
            queue.put_nowait(([last], True))
        except APIError as exc:
            queue.put_nowait(([], exc))
        except asyncio.CancelledError:
            raise  # the response is gone: nothing reads the queue
        except BaseException as exc:  # the stream must end, whatever ended the rounds
            queue.put_nowait(([], errors.as_api_error(exc, log, what)))
            if not isinstance(exc, Exception):
                raise

    async def enter(stack: AsyncExitStack) -> tuple[AsyncIterator[Write], Write]:
        task = asyncio.ensure_future(produce())
        stack.push_async_callback(_cancel, task)
        return _writes(queue), ([first], False)

    opened = await open_stream(request, enter, keepalive_for(request, keepalive))
    return StreamedResponse(opened, _as_is, error, what)


def _as_is(write: Write) -> Write:
    return write


async def _writes(queue: asyncio.Queue[Write]) -> AsyncIterator[Write]:
    while True:
        yield await queue.get()


async def _cancel(task: asyncio.Future[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
