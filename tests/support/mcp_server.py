"""A small MCP server for the tests, on the official `mcp` SDK: `python -m tests.support.mcp_server`
serves it over stdio (`--http PORT`: Streamable HTTP on 127.0.0.1).

Tools: `llm_time` (the tool the scripted test checkpoint calls by itself; returns TIME),
`add` (two integers), `hang` (never answers), `crash` (exits the server process), `fail`
(reports an error).
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer

TIME = "It is 12:34 UTC."

server = MCPServer("vllm-omni-mlx test tools")


@server.tool(description="The current time.")
def llm_time() -> str:
    return TIME


@server.tool(description="Adds two integers.")
def add(a: int, b: int) -> str:
    return str(a + b)


@server.tool(description="Never answers.")
def hang() -> str:
    time.sleep(3600)
    return "late"


@server.tool(description="Takes the server down.")
def crash() -> str:
    os._exit(3)


@server.tool(description="Always fails.")
def fail() -> str:
    raise ValueError("this tool always fails")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.settings.port = int(sys.argv[2]) if hasattr(server, "settings") else None
        server.run("streamable-http")
    else:
        server.run()
