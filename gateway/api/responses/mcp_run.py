"""A Response with remote MCP tools, whole or streamed: the rounds of
gateway/api/responses/mcp.py. Streamed, each round's output streams as it is generated and the
MCP items come as events between the rounds:

    mcp_list_tools: output_item.added, mcp_list_tools.in_progress,
                    mcp_list_tools.completed (or .failed), output_item.done
    mcp_call:       output_item.added, mcp_call_arguments.delta, mcp_call_arguments.done,
                    mcp_call.in_progress, (the call runs) mcp_call.completed (or .failed),
                    output_item.done
    mcp_approval_request: output_item.added, output_item.done

The rounds run in a task of their own (gateway/mcp_rounds/streamed.py).
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from starlette.requests import Request

from gateway.api.responses.events import ResponseEvents
from gateway.api.responses.mcp import ResponseRounds, response_of
from gateway.api.responses.objects import ResponseMeta
from gateway.api.responses.requests import ResponsesRequest
from gateway.api.responses.store import ResponseStore, StoredResponse
from gateway.generation.output import ChoiceOutput, ToolCall
from gateway.http.streaming import StreamedResponse
from gateway.mcp.client import CallResult
from gateway.mcp.config import McpServer
from gateway.mcp_rounds.items import call_item
from gateway.mcp_rounds.streamed import StreamedOutput, StreamedRounds, Write, stream_rounds
from gateway.workers.protocol import EngineClient
from protocol.messages import Delta

log = logging.getLogger(__name__)
T = TypeVar("T")


class _StreamedRounds(StreamedRounds, ResponseRounds):
    what = "response"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.events: ResponseEvents | None = None
        self._pending: dict[str, Any] | None = None

    def _emit(self, data: bytes) -> None:
        self.writes.emit(data)

    def _on_output(self, delta: Delta) -> None:
        assert self.events is not None
        self._emit(self.events.delta(0, delta))

    def _on_round_end(self, output: StreamedOutput) -> None:
        assert self.events is not None and output.terminal is not None
        self._emit(self.events.round_finish(output.terminal))

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


R = TypeVar("R", bound=ResponseRounds)


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
        logprobs=parsed.logprobs,
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
    rounds = _rounds(ResponseRounds, request, engine, parsed, servers)
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

    async def run() -> bytes:
        outcome = await rounds.run(parsed.approvals, parsed.approval_requests)
        return events.end(outcome.usage)

    return await stream_rounds(
        request, rounds.writes, run, events.start(), events.keepalive, events.error, "response"
    )
