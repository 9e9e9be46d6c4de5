"""The gateway's MCP client: one response's connections to the servers it uses.

`McpConnections` is entered for one response (in the task that serves it) and opens a
server's connection on first use, through the official `mcp` SDK's `Client`: a stdio server
is started as a process and stopped when the response ends. Every failure of a server (it
will not start, hangs past `timeout`, crashes, answers garbage, the tool reports an error)
becomes an error string for that listing or call, never an exception out of here: the
response goes on, and the model is told what failed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from gateway.mcp.config import McpServer

log = logging.getLogger(__name__)

# Characters of one call's output fed back to the model and returned.
MAX_OUTPUT_CHARS = 100_000
MAX_TOOL_PAGES = 20  # pages of a server's tool listing read (a server could page forever)


@dataclass(frozen=True, slots=True)
class ListedTool:
    name: str
    description: str | None
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class CallResult:
    output: str | None  # the tool's text
    error: str | None  # what failed, when something did
    # "tool": the tool reported an error; "protocol": the server could not be reached or
    # answered wrongly (with its JSON-RPC `code`)
    kind: str = "tool"
    code: int | None = None


class _ProcessSlots:
    """The stdio MCP server processes the gateway runs at once, MAX_PROCESSES at most: a
    response that would start one more waits for a slot (up to its server's timeout, then
    that server's listing or call fails, naming the limit). One per gateway process, whose
    one event loop its semaphore belongs to."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free: asyncio.Semaphore | None = None

    async def take(self, timeout: float) -> bool:
        if self._free is None:
            self._free = asyncio.Semaphore(self.size)
        try:
            await asyncio.wait_for(self._free.acquire(), timeout)
        except TimeoutError:
            return False
        return True

    def give_back(self) -> None:
        assert self._free is not None
        self._free.release()


MAX_PROCESSES = 32
PROCESS_SLOTS = _ProcessSlots(MAX_PROCESSES)


class McpConnections:
    def __init__(self, servers: Mapping[str, McpServer]) -> None:
        # Each response starts the stdio servers it uses (not pooled across responses: a server
        # keeps no state between them, and its process ends with the response), within
        # PROCESS_SLOTS.
        self._servers = servers
        self._stack = AsyncExitStack()
        self._clients: dict[str, Any] = {}
        self._broken: dict[str, str] = {}  # label -> why its connection failed

    async def __aenter__(self) -> McpConnections:
        return self

    async def __aexit__(self, *exc: object) -> None:
        # No cancel scope of ours around the SDK's: its task groups must close in the scopes
        # they were opened in (the SDK stops a stdio server itself, killing it if it hangs).
        try:
            await self._stack.aclose()
        except Exception:  # a server that fails while being stopped changes nothing here
            log.warning("closing MCP connections failed", exc_info=True)

    async def list_tools(self, label: str) -> tuple[list[ListedTool], str | None]:
        """The server's tools, every page of them (MAX_TOOL_PAGES at most, then what the
        pages so far held and a note), or ([], what failed)."""
        tools: list[ListedTool] = []
        cursor = None
        try:
            client = await self._client(label)
            seen: set[str] = set()
            for _ in range(MAX_TOOL_PAGES):
                result = await client.list_tools(cursor=cursor)
                tools += [_listed(tool) for tool in result.tools]
                cursor = result.next_cursor
                if not cursor or cursor in seen:  # the last page (or a server going round)
                    return tools, None
                seen.add(cursor)
        except Exception as exc:
            return [], _failure(f"listing the tools of {label!r}", exc)
        return (
            tools,
            f"{label!r} lists more than {MAX_TOOL_PAGES} pages of tools: the rest left out",
        )

    async def call_tool(self, label: str, name: str, arguments: dict[str, Any]) -> CallResult:
        try:
            client = await self._client(label)
            result = await client.call_tool(name, arguments)
        except Exception as exc:
            code = getattr(getattr(exc, "error", None), "code", None)
            failure = _failure(f"calling {name} on {label!r}", exc)
            return CallResult(None, failure, "protocol", code if isinstance(code, int) else None)
        text = "\n".join(
            part.text for part in result.content if getattr(part, "type", None) == "text"
        )
        if not text and result.structured_content is not None:
            text = json.dumps(result.structured_content, ensure_ascii=False)
        text = text[:MAX_OUTPUT_CHARS]
        if result.is_error:
            return CallResult(None, text or f"{name} on {label!r} reported an error")
        return CallResult(text, None)

    async def _client(self, label: str) -> Any:
        if label in self._broken:
            raise ConnectionError(self._broken[label])
        client = self._clients.get(label)
        if client is not None:
            return client
        from mcp import Client, StdioServerParameters  # imported with the first MCP request

        server = self._servers[label]
        target: Any
        if server.url is not None:
            target = server.url
        else:
            target = StdioServerParameters(
                command=server.command[0],
                args=list(server.command[1:]),
                env=dict(server.env) or None,
                cwd=server.cwd,
            )
            if not await PROCESS_SLOTS.take(server.timeout):
                raise ConnectionError(
                    f"the gateway's {PROCESS_SLOTS.size} MCP server processes are all running"
                )
        try:
            client = await self._stack.enter_async_context(
                Client(target, mode="legacy", read_timeout_seconds=server.timeout)
            )
        except Exception as exc:
            if server.url is None:
                PROCESS_SLOTS.give_back()  # no process runs
            self._broken[label] = _failure(f"connecting to {label!r}", exc)
            raise
        if server.url is None:
            self._stack.callback(PROCESS_SLOTS.give_back)  # once its process has stopped
        self._clients[label] = client
        return client


def _listed(tool: Any) -> ListedTool:
    annotations = tool.annotations.model_dump(exclude_none=True) if tool.annotations else None
    return ListedTool(tool.name, tool.description, dict(tool.input_schema or {}), annotations)


def _failure(what: str, exc: BaseException) -> str:
    log.warning("MCP: %s failed: %r", what, exc)
    detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    return f"{what} failed: {detail}"
