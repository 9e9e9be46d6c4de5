"""The gateway's MCP client reads every page of a server's tool listing (gateway/mcp/client.py),
up to MAX_TOOL_PAGES."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import SimpleNamespace

from gateway.mcp import client as client_module
from gateway.mcp.client import MAX_TOOL_PAGES, McpConnections
from gateway.mcp.config import McpServer


def tool(name: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, description=None, input_schema={}, annotations=None)


class PagedClient:
    """Answers list_tools page by page, as a paginating MCP server does."""

    def __init__(self, pages: int, endless: bool = False) -> None:
        self.pages, self.endless, self.cursors = pages, endless, []

    async def list_tools(self, cursor: str | None = None) -> SimpleNamespace:
        self.cursors.append(cursor)
        page = 0 if cursor is None else int(cursor)
        last = page + 1 >= self.pages and not self.endless
        return SimpleNamespace(
            tools=[tool(f"t{page}")], next_cursor=None if last else str(page + 1)
        )


def listed(client: PagedClient) -> tuple[list[str], str | None]:
    server = McpServer("s", command=("true",))
    connections = McpConnections({"s": server})
    connections._clients["s"] = client  # the connection, as if opened
    tools, error = asyncio.run(connections.list_tools("s"))
    return [t.name for t in tools], error


def test_every_page_of_the_listing_is_read():
    client = PagedClient(3)
    assert listed(client) == (["t0", "t1", "t2"], None)
    assert client.cursors == [None, "1", "2"]


def test_a_cursor_seen_before_or_empty_ends_the_listing():
    class Circling(PagedClient):
        async def list_tools(self, cursor: str | None = None) -> SimpleNamespace:
            self.cursors.append(cursor)
            return SimpleNamespace(tools=[tool(f"t{len(self.cursors)}")], next_cursor="again")

    assert listed(Circling(0)) == (["t1", "t2"], None)
    empty = PagedClient(1)
    assert listed(empty) == (["t0"], None)


def test_a_server_that_pages_forever_is_cut_with_a_note():
    names, error = listed(PagedClient(0, endless=True))
    assert len(names) == MAX_TOOL_PAGES and "more than" in (error or "")


def test_stdio_server_processes_are_bounded_across_responses(monkeypatch):
    monkeypatch.setattr(client_module, "PROCESS_SLOTS", client_module._ProcessSlots(1))
    root = str(Path(__file__).resolve().parents[2])
    command = (sys.executable, "-m", "tests.support.mcp_server")
    servers = {"tools": McpServer("tools", command=command, cwd=root, timeout=60.0)}
    impatient = {"tools": McpServer("tools", command=command, cwd=root, timeout=0.5)}

    async def run() -> tuple:
        async with McpConnections(servers) as first:
            held, _ = await first.list_tools("tools")  # its process takes the one slot
            async with McpConnections(impatient) as second:
                refused, error = await second.list_tools("tools")
        async with McpConnections(servers) as third:  # the first's process has stopped
            later, _ = await third.list_tools("tools")
        return held, refused, error, later

    held, refused, error, later = asyncio.run(run())
    assert held and later and refused == []
    assert "1 MCP server processes are all running" in (error or "")
