"""The Responses API's streaming events for one response (a `StreamEncoder`).

    response.created, response.in_progress,
    per output item, in order:
      reasoning: output_item.added, content_part.added, reasoning_text.delta*,
                 reasoning_text.done, content_part.done, output_item.done
      message:   output_item.added, content_part.added, output_text.delta*,
                 output_text.done, content_part.done, output_item.done
      function:  output_item.added, function_call_arguments.delta*,
                 function_call_arguments.done, output_item.done
    response.completed (or response.incomplete after max_output_tokens)

A response with remote MCP tools (mcp_run.py) is several generations: their items follow
one another (`round_finish` between them), with the MCP items in between (`open_item`,
`close_item`); the MCP calls' own pieces are not streamed as function_call items (`hidden`).

Every event carries `sequence_number` (0, 1, ...). A failure after the start is an `error`
event followed by `response.failed`. When the response is over, `on_done(response, output)` is
called (the route stores it for `previous_response_id`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.api.responses.objects import (
    ResponseMeta,
    function_call_item,
    message_item,
    new_id,
    output_text,
    reasoning_item,
)
from gateway.generation.logprobs import chat_content
from gateway.generation.output import ChoiceOutput, is_first_piece
from gateway.http.errors import APIError
from gateway.http.sse import SSE_COMMENT, sse_event
from protocol.messages import Delta, Usage

OnDone = Callable[[dict[str, Any], ChoiceOutput], None]


class ResponseEvents:
    keepalive = SSE_COMMENT

    def __init__(
        self,
        meta: ResponseMeta,
        logprobs: bool,
        on_done: OnDone | None = None,
        hidden: Callable[[str], bool] | None = None,
    ) -> None:
        self._meta = meta
        self._logprobs = logprobs
        self._on_done = on_done
        # Calls not streamed as function_call items (remote MCP tools': mcp_run.py), by name.
        self._hidden = hidden
        self._hidden_calls: set[int] = set()
        self._seq = 0
        self._output = ChoiceOutput()
        self._items: list[dict[str, Any]] = []  # finished items
        self._open: dict[str, Any] | None = None  # {"kind", "id", "text", "logprobs", ...}
        self._finish: str | None = None

    def _event(self, kind: str, **fields: Any) -> bytes:
        event = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return sse_event(kind, event)

    def start(self, usage: Usage | None = None) -> bytes:
        snapshot = self._meta.snapshot("in_progress", [])
        return self._event("response.created", response=snapshot) + self._event(
            "response.in_progress", response=snapshot
        )

    def delta(self, index: int, delta: Delta) -> bytes:
        self._output.add(delta)
        parts = []
        if delta.reasoning:
            parts.append(self._ensure("reasoning"))
            parts.append(self._part_delta("response.reasoning_text.delta", delta.reasoning))
        if delta.text:
            parts.append(self._ensure("message"))
            logprobs = (delta.logprobs or []) if self._logprobs else []
            self._open["logprobs"].extend(logprobs)  # type: ignore[index]
            parts.append(
                self._part_delta("response.output_text.delta", delta.text, chat_content(logprobs))
            )
        for piece in delta.tool_calls:
            if piece.index in self._hidden_calls:
                continue
            if is_first_piece(piece):
                call = self._output.calls[piece.index]
                if self._hidden is not None and self._hidden(call.name):
                    self._hidden_calls.add(piece.index)
                    continue
                parts.append(self._close())
                parts.append(self._add("function_call", call_id=call.id, name=call.name))
            if piece.arguments and self._open is not None:
                self._open["text"] += piece.arguments
                parts.append(
                    self._event(
                        "response.function_call_arguments.delta",
                        item_id=self._open["id"],
                        output_index=len(self._items),
                        delta=piece.arguments,
                    )
                )
        return b"".join(parts)

    def _part_delta(self, kind: str, text: str, logprobs: list | None = None) -> bytes:
        assert self._open is not None
        self._open["text"] += text
        extra = {} if logprobs is None else {"logprobs": logprobs}
        return self._event(
            kind,
            item_id=self._open["id"],
            output_index=len(self._items),
            content_index=0,
            delta=text,
            **extra,
        )

    def _ensure(self, kind: str) -> bytes:
        if self._open is not None and self._open["kind"] == kind:
            return b""
        return self._close() + self._add(kind)

    def _add(self, kind: str, **call: str) -> bytes:
        prefix = {"reasoning": "rs", "message": "msg", "function_call": "fc"}[kind]
        item_id = new_id(prefix)
        self._open = {"kind": kind, "id": item_id, "text": "", "logprobs": [], **call}
        where = {"output_index": len(self._items)}
        if kind == "function_call":
            item = function_call_item(item_id, call["call_id"], call["name"], "", "in_progress")
            return self._event("response.output_item.added", item=item, **where)
        if kind == "reasoning":
            item, part = (
                reasoning_item(item_id, "", "in_progress"),
                {"type": "reasoning_text", "text": ""},
            )
        else:
            item, part = message_item(item_id, "", None, "in_progress"), output_text("", [])
        return self._event("response.output_item.added", item=item, **where) + self._event(
            "response.content_part.added", item_id=item_id, content_index=0, part=part, **where
        )

    def _close(self) -> bytes:
        item = self._open
        if item is None:
            return b""
        self._open = None
        where = {"item_id": item["id"], "output_index": len(self._items)}
        kind, text = item["kind"], item["text"]
        if kind == "function_call":
            done = function_call_item(item["id"], item["call_id"], item["name"], text)
            head = self._event(
                "response.function_call_arguments.done", name=item["name"], arguments=text, **where
            )
        elif kind == "reasoning":
            done = reasoning_item(item["id"], text)
            part = done["content"][0]
            head = self._event("response.reasoning_text.done", content_index=0, text=text, **where)
            head += self._event("response.content_part.done", content_index=0, part=part, **where)
        else:
            logprobs = item["logprobs"] if self._logprobs else None
            done = message_item(item["id"], text, logprobs)
            part = done["content"][0]
            head = self._event(
                "response.output_text.done",
                content_index=0,
                text=text,
                logprobs=part["logprobs"],
                **where,
            )
            head += self._event("response.content_part.done", content_index=0, part=part, **where)
        tail = self._event("response.output_item.done", item=done, output_index=len(self._items))
        self._items.append(done)
        return head + tail

    def finish(self, index: int, terminal: Delta) -> bytes:
        self._output.add(terminal)
        self._finish = self._output.finish
        out = self._close()
        if not self._items:  # an empty answer is still one (empty) message
            out += self._add("message") + self._close()
        return out

    def round_finish(self, terminal: Delta) -> bytes:
        """The end of one of several generations in this response (remote MCP tools' rounds):
        its open item closes; the next round's output follows."""
        self._output.add(terminal)
        self._finish = self._output.finish
        out = self._close()
        self._output = ChoiceOutput()
        self._hidden_calls = set()
        return out

    def open_item(self, item: dict[str, Any], steps: list[tuple[str, dict[str, Any]]]) -> bytes:
        """An item added (as `item`, in progress) and the item events `steps` about it."""
        where = {"output_index": len(self._items)}
        out = self._event("response.output_item.added", item=item, **where)
        for kind, fields in steps:
            out += self._event(kind, item_id=item["id"], **where, **fields)
        return out

    def close_item(self, item: dict[str, Any], steps: list[tuple[str, dict[str, Any]]]) -> bytes:
        """The item events `steps`, then the item done (as `item`), of the last opened item."""
        where = {"output_index": len(self._items)}
        out = b"".join(
            self._event(kind, item_id=item["id"], **where, **fields) for kind, fields in steps
        )
        out += self._event("response.output_item.done", item=item, **where)
        self._items.append(item)
        return out

    def end(self, usage: Usage) -> bytes:
        response = self._meta.snapshot("completed", self._items, usage, self._finish)
        if self._on_done is not None:
            self._on_done(response, self._output)
        kind = "response.completed" if response["status"] == "completed" else "response.incomplete"
        return self._event(kind, response=response)

    def error(self, error: APIError) -> bytes:
        failure = {"code": "server_error", "message": error.message}
        failed = self._meta.snapshot("failed", self._items, error=failure)
        return self._event(
            "error", code=error.code, message=error.message, param=error.param
        ) + self._event("response.failed", response=failed)
