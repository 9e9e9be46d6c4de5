"""A Response with remote MCP tools, whole or streamed: the rounds of
gateway/api/responses/mcp.py. Streamed, each round's output streams as it is generated and the
MCP items come as events between the rounds:

    mcp_list_tools: output_item.added, mcp_list_tools.in_progress,
                    mcp_list_tools.completed (or .failed), output_item.done
    mcp_call:       output_item.added, mcp_call_arguments.delta, mcp_call_arguments.done,
                    mcp_call.in_progress, (the call runs) mcp_call.completed (or .failed),
                    output_item.done
    mcp_approval_request: output_item.added, output_item.done

The rounds run in a task of their own (the MCP SDK's connections must open and close in one
task), which queues each write for the response; the client leaving cancels the task, which
aborts the round's worker request and stops the MCP servers. A failure after the stream
started is the API's `error` event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable
from contextlib import AsyncExitStack
from typing import Any, TypeVar

from starlette.requests import Request

from gateway.api.responses.events import ResponseEvents
from gateway.api.responses.mcp import McpRounds, call_item, response_of
from gateway.api.responses.objects import ResponseMeta
from gateway.api.responses.requests import ResponsesRequest
from gateway.api.responses.store import ResponseStore, StoredResponse
from gateway.generation import lifecycle
from gateway.generation.output import ChoiceOutput, ToolCall
from gateway.generation.request import GenerationRequest
from gateway.http import errors
from gateway.http.errors import APIError
from gateway.http.sse import has_output
from gateway.http.streaming import Ending, StreamedResponse, keepalive_for, open_stream
from gateway.mcp.client import CallResult
from gateway.mcp.config import McpServer
from gateway.workers.protocol import EngineClient

log = logging.getLogger(__name__)
T = TypeVar("T")

Write = tuple[list[bytes], Ending]


class _StreamedRounds(McpRounds):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.queue: asyncio.Queue[Write] = asyncio.Queue()
        self.events: ResponseEvents | None = None
        self._pending: dict[str, Any] | None = None

    def offers(self, name: str) -> bool:
        return name in self._offered

    def _emit(self, data: bytes) -> None:
        if data:
            self.queue.put_nowait(([data], False))

    async def _generate(self, req: GenerationRequest) -> ChoiceOutput:
        assert self.events is not None
        lifecycle.check_max_tokens(self._engine, req)
        output = ChoiceOutput()
        async with self._engine.request(req.inputs, True) as batches:
            async for batch in batches:
                for delta in batch:
                    output.add(delta)
                    if has_output(delta):
                        self._emit(self.events.delta(0, delta))
                    if delta.finish_reason is None:
                        continue
                    error = errors.terminal_error(delta)
                    if error is not None:
                        raise error
                    self._emit(self.events.round_finish(delta))
                    return output
        raise errors.no_terminal("response")

    def _item(self, item: dict[str, Any]) -> None:
        assert self.events is not None
        steps: list[tuple[str, dict[str, Any]]] = []
        if item["type"] == "mcp_list_tools":
            ended = "failed" if item["error"] and not item["tools"] else "completed"
            steps = [("response.mcp_list_tools.in_progress", {})]
            self._emit(self.events.open_item({**item, "tools": []}, steps))
            self._emit(self.events.close_item(item, [(f"response.mcp_list_tools.{ended}", {})]))
            return
        self._emit(self.events.open_item(item, []) + self.events.close_item(item, []))

    def _round_items(self, output: ChoiceOutput) -> None:
        """Streamed as they were generated."""

    async def _watched(self, work: Awaitable[T]) -> T:
        """The streamed response's own watcher cancels this task when the client leaves."""
        return await work

    def _calling(self, label: str, call: ToolCall, approval_id: str | None) -> None:
        assert self.events is not None
        pending = {**call_item(label, call, CallResult(None, None), approval_id)}
        pending["status"] = "in_progress"
        self._pending = pending
        steps = [
            ("response.mcp_call_arguments.delta", {"delta": call.arguments}),
            ("response.mcp_call_arguments.done", {"arguments": call.arguments}),
            ("response.mcp_call.in_progress", {}),
        ]
        self._emit(self.events.open_item(pending, steps))

    def _called(self, item: dict[str, Any]) -> None:
        assert self.events is not None and self._pending is not None
        item = {**item, "id": self._pending["id"]}
        ended = "failed" if item["error"] is not None else "completed"
        self._emit(self.events.close_item(item, [(f"response.mcp_call.{ended}", {})]))
        self._pending = None


R = TypeVar("R", bound=McpRounds)


def _rounds(
    kind: type[R],
    request: Request,
    engine: EngineClient,
    parsed: ResponsesRequest,
    servers: dict[str, McpServer],
) -> R:
    return kind(
        request,
        engine,
        parsed.generation,
        parsed.conversation,
        parsed.mcp,
        servers,
        parsed.logprobs,
    )


async def complete_with_mcp(
    request: Request,
    engine: EngineClient,
    parsed: ResponsesRequest,
    meta: ResponseMeta,
    servers: dict[str, McpServer],
    store: ResponseStore,
) -> dict[str, Any]:
    """The whole Response (stored unless `store: false`)."""
    rounds = _rounds(McpRounds, request, engine, parsed, servers)
    outcome = await rounds.run(parsed.approvals, parsed.approval_requests)
    response = response_of(meta, outcome)
    if parsed.store:
        store.put(meta.id, StoredResponse(response, outcome.conversation))
    return response


async def stream_with_mcp(
    request: Request,
    engine: EngineClient,
    parsed: ResponsesRequest,
    meta: ResponseMeta,
    servers: dict[str, McpServer],
    store: ResponseStore,
) -> StreamedResponse[Write]:
    rounds = _rounds(_StreamedRounds, request, engine, parsed, servers)

    def on_done(response: dict[str, Any], _: ChoiceOutput) -> None:
        if parsed.store:
            store.put(meta.id, StoredResponse(response, rounds.conversation))

    events = ResponseEvents(meta, parsed.logprobs, on_done, hidden=rounds.offers)
    rounds.events = events

    async def produce() -> None:
        try:
            outcome = await rounds.run(parsed.approvals, parsed.approval_requests)
            rounds.queue.put_nowait(([events.end(outcome.usage)], True))
        except APIError as exc:
            rounds.queue.put_nowait(([], exc))
        except asyncio.CancelledError:
            raise  # the response is gone: nothing reads the queue
        except BaseException as exc:  # the stream must end, whatever ended the rounds
            rounds.queue.put_nowait(([], errors.as_api_error(exc, log, "response")))
            if not isinstance(exc, Exception):
                raise

    async def enter(stack: AsyncExitStack) -> tuple[AsyncIterator[Write], Write]:
        task = asyncio.ensure_future(produce())
        stack.push_async_callback(_cancel, task)
        return _writes(rounds.queue), ([events.start()], False)

    opened = await open_stream(request, enter, keepalive_for(request, events.keepalive))
    return StreamedResponse(opened, _as_is, events.error, "response")


def _as_is(write: Write) -> Write:
    return write


async def _writes(queue: asyncio.Queue[Write]) -> AsyncIterator[Write]:
    while True:
        yield await queue.get()


async def _cancel(task: asyncio.Future[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
