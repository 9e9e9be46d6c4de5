"""`--mcp-config` files and the Responses API's `mcp` tool specs, checked."""

from __future__ import annotations

import json

import pytest

from gateway.http.errors import APIError
from gateway.mcp.client import ListedTool
from gateway.mcp.config import McpConfigError, McpServer, load_mcp_config
from gateway.mcp_rounds.tools import check_servers, parse_tool


def load(tmp_path, data) -> tuple[McpServer, ...]:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(data))
    return load_mcp_config(path)


def test_stdio_and_http_servers_in_claude_s_shape(tmp_path):
    servers = load(
        tmp_path,
        {
            "mcpServers": {
                "clock": {"command": "python", "args": ["-m", "clock"], "env": {"TZ": "UTC"}},
                "docs": {"url": "http://127.0.0.1:9000/mcp", "timeout": 5},
            }
        },
    )
    assert servers == (
        McpServer("clock", command=("python", "-m", "clock"), env=(("TZ", "UTC"),)),
        McpServer("docs", url="http://127.0.0.1:9000/mcp", timeout=5.0),
    )
    assert load(tmp_path, {"servers": {"a": {"command": "x"}}})[0].label == "a"


@pytest.mark.parametrize(
    "data, named",
    [
        ({}, "mcpServers"),
        ({"mcpServers": {"a": {}}}, "mcpServers.a"),
        ({"mcpServers": {"a": {"command": "x", "url": "http://h"}}}, "mcpServers.a"),
        ({"mcpServers": {"a": {"url": "ftp://h/x"}}}, "mcpServers.a.url"),
        ({"mcpServers": {"a": {"command": "x", "args": "y"}}}, "mcpServers.a.args"),
        ({"mcpServers": {"a": {"command": "x", "timeout": 0}}}, "mcpServers.a.timeout"),
        ({"mcpServers": {"a": {"command": "x", "shell": True}}}, "unknown keys"),
        ({"mcpServers": {"a b": {"command": "x"}}}, "mcpServers.a b"),
    ],
)
def test_a_bad_file_names_the_entry(tmp_path, data, named):
    with pytest.raises(McpConfigError, match=named):
        load(tmp_path, data)


def test_tool_specs_narrow_tools_and_approvals():
    tool = parse_tool(
        {
            "type": "mcp",
            "server_label": "t",
            "allowed_tools": {"tool_names": ["a", "b"], "read_only": True},
            "require_approval": {"never": {"tool_names": ["a"]}},
        },
        "tools[0]",
    )
    read_only = ListedTool("a", None, {}, {"readOnlyHint": True})
    assert tool.offers(read_only)
    assert not tool.offers(ListedTool("b", None, {}, None))  # not read-only
    assert not tool.offers(ListedTool("c", None, {}, {"readOnlyHint": True}))
    assert not tool.needs_approval("a") and tool.needs_approval("b")
    never = parse_tool({"type": "mcp", "server_label": "t", "require_approval": "never"}, "t")
    assert not never.needs_approval("anything")
    assert parse_tool({"type": "mcp", "server_label": "t"}, "t").needs_approval("x")


def test_servers_are_named_by_label_and_their_configured_url():
    servers = {"t": McpServer("t", url="http://127.0.0.1:1/mcp")}
    check_servers(
        [parse_tool({"server_label": "t", "server_url": "http://127.0.0.1:1/mcp/"}, "p")], servers
    )
    for spec, param in (
        ({"server_label": "u"}, "p.server_label"),
        ({"server_label": "t", "server_url": "http://127.0.0.1:2/mcp"}, "p.server_url"),
    ):
        with pytest.raises(APIError) as info:
            check_servers([parse_tool(spec, "p")], servers)
        assert info.value.param == param
