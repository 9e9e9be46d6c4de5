"""A request's remote MCP tools (OpenAI's `{"type": "mcp", ...}` tool shape), checked, and the
servers they name checked against the operator's `--mcp-config`. Shared by the APIs that take
them: the Responses API (gateway/api/responses/) and chat completions' extension
(gateway/api/chat_completions/mcp.py).

The tool names a server (`server_label`, optionally its `server_url`), may narrow its tools
(`allowed_tools`: names, or `{"tool_names", "read_only"}`) and says which calls need the
client's approval (`require_approval`: "always" (the default), "never", or `{"always" |
"never": {"tool_names": [...]}}`). Only servers the operator listed in `--mcp-config` can be
named (gateway/mcp/config.py); a `server_url` must be the one listed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.generation.tools import defer_loading
from gateway.http.errors import invalid, unsupported
from gateway.mcp.client import ListedTool
from gateway.mcp.config import McpServer

_TOOL_KEYS = {
    "type",
    "server_label",
    "server_url",
    "server_description",
    "allowed_tools",
    "require_approval",
    "headers",
    "authorization",
    "connector_id",
    "defer_loading",
    "allowed_callers",
    "tunnel_id",
}


@dataclass(frozen=True, slots=True)
class McpTool:
    """One request's `mcp` tool, checked."""

    label: str
    url: str | None = None
    allowed: frozenset[str] | None = None  # None: every tool
    read_only: bool = False  # only tools annotated readOnlyHint
    always: frozenset[str] | None = None  # None: every call needs approval
    never: frozenset[str] = frozenset()
    path: str = "tools[0]"

    def offers(self, tool: ListedTool) -> bool:
        if self.allowed is not None and tool.name not in self.allowed:
            return False
        return not self.read_only or bool((tool.annotations or {}).get("readOnlyHint"))

    def needs_approval(self, name: str) -> bool:
        if name in self.never:
            return False
        return self.always is None or name in self.always


def is_mcp(tool: Any) -> bool:
    return isinstance(tool, dict) and tool.get("type") == "mcp"


def parse_tools(tools: Sequence[Any]) -> tuple[McpTool, ...]:
    """The `mcp` tools of a request's `tools` (paths by their places there), each server named
    once."""
    parsed = tuple(parse_tool(t, f"tools[{i}]") for i, t in enumerate(tools) if is_mcp(t))
    seen: set[str] = set()
    for tool in parsed:
        if tool.label in seen:
            raise invalid(
                f"{tool.path}.server_label", f"MCP server {tool.label!r} is named by two tools"
            )
        seen.add(tool.label)
    return parsed


def parse_tool(tool: dict[str, Any], path: str) -> McpTool:
    unknown = sorted(set(tool) - _TOOL_KEYS)
    if unknown:
        raise invalid(f"{path}.{unknown[0]}", f"Unknown parameter: '{path}.{unknown[0]}'.")
    label = tool.get("server_label")
    if not isinstance(label, str) or not label:
        raise invalid(f"{path}.server_label", f"`{path}.server_label` must be a non-empty string")
    for key in ("connector_id", "tunnel_id", "headers", "authorization"):
        if tool.get(key) is not None:
            raise unsupported(
                f"{path}.{key}",
                "connectors, headers and authorization (the operator's --mcp-config holds "
                "each server's settings)",
            )
    if defer_loading(tool, path):  # its tools would wait for a tool search to load them
        raise unsupported(f"{path}.defer_loading", "deferred MCP tools (no tool search runs here)")
    url = tool.get("server_url")
    if url is not None and not isinstance(url, str):
        raise invalid(f"{path}.server_url", f"`{path}.server_url` must be a string")
    allowed, read_only = _allowed(tool.get("allowed_tools"), f"{path}.allowed_tools")
    always, never = _approval(tool.get("require_approval"), f"{path}.require_approval")
    return McpTool(label, url, allowed, read_only, always, never, path)


def _names(value: Any, path: str) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(n, str) and n for n in value):
        raise invalid(path, f"`{path}` must be an array of tool names")
    return frozenset(value)


def _allowed(value: Any, path: str) -> tuple[frozenset[str] | None, bool]:
    if value is None:
        return None, False
    if isinstance(value, list):
        return _names(value, path), False
    if isinstance(value, dict) and set(value) <= {"tool_names", "read_only"}:
        read_only = value.get("read_only")
        if read_only is not None and not isinstance(read_only, bool):
            raise invalid(f"{path}.read_only", f"`{path}.read_only` must be a boolean")
        names = value.get("tool_names")
        return (None if names is None else _names(names, f"{path}.tool_names")), bool(read_only)
    raise invalid(path, f"`{path}` must be an array of names or {{tool_names, read_only}}")


def _approval(value: Any, path: str) -> tuple[frozenset[str] | None, frozenset[str]]:
    """(names that need approval, None: all of them; names that do not)."""
    if value is None or value == "always":
        return None, frozenset()
    if value == "never":
        return frozenset(), frozenset()
    if isinstance(value, dict) and value and set(value) <= {"always", "never"}:
        sets: dict[str, frozenset[str]] = {}
        for key in ("always", "never"):
            spec = value.get(key)
            if spec is None:
                sets[key] = frozenset()
            elif isinstance(spec, dict) and set(spec) <= {"tool_names", "read_only"}:
                names = spec.get("tool_names")
                sets[key] = _names(names or [], f"{path}.{key}.tool_names")
            else:
                raise invalid(f"{path}.{key}", f"`{path}.{key}` must be {{tool_names: [...]}}")
        # Calls named under neither need approval, as with the default.
        return None, sets["never"] - sets["always"]
    raise invalid(path, f"`{path}` must be 'always', 'never' or {{always, never}}")


def check_servers(tools: Sequence[McpTool], servers: Mapping[str, McpServer]) -> None:
    """Every tool names a server the operator listed (and its URL, if it gives one)."""
    for tool in tools:
        server = servers.get(tool.label)
        if server is None:
            known = (
                ", ".join(sorted(servers)) or "none: the server was started without --mcp-config"
            )
            raise invalid(
                f"{tool.path}.server_label",
                f"MCP server {tool.label!r} is not one this server may reach (allowed: {known})",
            )
        if tool.url is not None and tool.url.rstrip("/") != (server.url or "").rstrip("/"):
            raise invalid(
                f"{tool.path}.server_url",
                f"`{tool.path}.server_url` is not the URL configured for {tool.label!r}",
            )
