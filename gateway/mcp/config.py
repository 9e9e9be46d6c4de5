"""`--mcp-config FILE`: the MCP servers requests may use, by label; nothing else is reachable.

The file is JSON in the shape Claude Code and Claude Desktop read (`servers` is VS Code's name
for the same map):

    {"mcpServers": {
        "clock": {"command": "python", "args": ["-m", "clock_server"], "env": {"TZ": "UTC"}},
        "docs": {"url": "http://127.0.0.1:9000/mcp"}}}

A server is a command the gateway starts (stdio; `args`, `env`, `cwd` optional) or an
http(s) URL (Streamable HTTP); `timeout` (seconds, default 30) bounds each listing and call. Listing a server is allowing it: a request names a server by
its label (`server_label`), and a `server_url` it sends must be the URL listed for that label.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

_SERVER_KEYS = {"command", "args", "env", "cwd", "url", "type", "description", "timeout"}
DEFAULT_TIMEOUT = 30.0  # seconds one listing or call may take (a stdio server's start included)


@dataclass(frozen=True, slots=True)
class McpServer:
    label: str
    command: tuple[str, ...] = ()  # the program and its arguments (stdio)
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str | None = None  # Streamable HTTP
    description: str | None = None
    timeout: float = DEFAULT_TIMEOUT


class McpConfigError(ValueError):
    """The file is not a valid MCP server list (the message names the entry)."""


def load_mcp_config(path: str | Path) -> tuple[McpServer, ...]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise McpConfigError(f"{path}: {exc}") from exc
    servers = data.get("mcpServers", data.get("servers")) if isinstance(data, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise McpConfigError(f'{path}: expected {{"mcpServers": {{LABEL: {{...}}, ...}}}}')
    return tuple(_server(label, entry) for label, entry in servers.items())


def _server(label: str, entry: Any) -> McpServer:
    where = f"mcpServers.{label}"
    if not label or not label.replace("_", "").replace("-", "").isalnum():
        raise McpConfigError(f"{where}: a label is letters, digits, '-' and '_'")
    if not isinstance(entry, Mapping):
        raise McpConfigError(f"{where}: must be an object")
    unknown = sorted(set(entry) - _SERVER_KEYS)
    if unknown:
        raise McpConfigError(f"{where}: unknown keys {unknown}")
    description = _optional_str(entry, "description", where)
    timeout = entry.get("timeout", DEFAULT_TIMEOUT)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 0 < timeout <= 3600
    ):
        raise McpConfigError(f"{where}.timeout: seconds, more than 0 and at most 3600")
    url = _optional_str(entry, "url", where)
    command = _optional_str(entry, "command", where)
    if (url is None) == (command is None):
        raise McpConfigError(f"{where}: give either `command` (stdio) or `url` (HTTP)")
    if url is not None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise McpConfigError(f"{where}.url: an http(s) URL, got {url!r}")
        return McpServer(label, url=url, description=description, timeout=float(timeout))
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise McpConfigError(f"{where}.args: a list of strings")
    env = entry.get("env", {})
    if not isinstance(env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise McpConfigError(f"{where}.env: an object of strings")
    assert command is not None
    return McpServer(
        label,
        command=(command, *args),
        env=tuple(sorted(env.items())),
        cwd=_optional_str(entry, "cwd", where),
        description=description,
        timeout=float(timeout),
    )


def _optional_str(entry: Mapping[str, Any], key: str, where: str) -> str | None:
    value = entry.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise McpConfigError(f"{where}.{key}: a non-empty string")
    return value
