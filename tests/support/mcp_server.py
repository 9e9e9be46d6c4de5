"""A small MCP server for the tests, on the official `mcp` SDK: `python -m tests.support.mcp_server`
serves it over stdio (`--http PORT`: Streamable HTTP on 127.0.0.1).

Tools: `llm_time` (the tool the scripted test checkpoint calls by itself; returns TIME),
`add` (two integers), `hang` (never answers), `crash` (exits the server process), `fail`
(reports an error).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

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


def write_config(folder: Path) -> Path:
    """The tests' `--mcp-config` file in `folder`: "tools" (this server over stdio), "slow"
    (the same with a 2 s time limit), "broken" (a command that exits at once), "web" (a URL
    where nothing listens)."""
    root = Path(__file__).resolve().parents[2]
    stdio = {
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_server"],
        "cwd": str(root),
    }
    config = {
        "mcpServers": {
            "tools": stdio,
            "slow": {**stdio, "timeout": 2},
            "broken": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(1)"]},
            "web": {"url": "http://127.0.0.1:9/mcp"},
        }
    }
    path = folder / "mcp.json"
    path.write_text(json.dumps(config))
    return path


def start_gateway(start_server, tmp_path_factory, name: str):
    """A server of the scripted tiny Qwen3 (worker/tiny_models/scripted.py) with the tests'
    `--mcp-config` (write_config)."""
    from worker.tiny_models import ensure_checkpoint

    config = write_config(tmp_path_factory.mktemp("mcp"))
    path = str(ensure_checkpoint("qwen3_scripted"))
    return start_server(path, "--mcp-config", str(config), name=name)


def running_under(parent: int) -> list[int]:
    """The processes of this server that `parent` (a gateway) started and that run now: a
    gateway's stdio MCP servers are its children (others, of other tests' gateways, are not
    counted)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
                # stat: "pid (comm) state ppid ...": comm may hold spaces, so split after ")"
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if b"tests.support.mcp_server" in command and ppid == parent:
                found.append(int(entry.name))
    return found


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.settings.port = int(sys.argv[2]) if hasattr(server, "settings") else None
        server.run("streamable-http")
    else:
        server.run()
