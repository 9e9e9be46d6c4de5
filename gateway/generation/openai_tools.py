"""OpenAI chat `tools`, `tool_choice` and `parallel_tool_calls` -> the worker's inputs.

Only function tools exist locally; other tool types (custom grammars, hosted tools) and
`tool_choice` forms that restrict to a subset (`allowed_tools`) are 400s naming them.
"""

from __future__ import annotations

from typing import Any

from gateway.generation.tools import function_tool, named_choice, tool_inputs
from gateway.http.errors import invalid, unknown_field, unsupported
from gateway.schema import readers as f

_CHOICES = ("none", "auto", "required")


def parse_tool_fields(body: dict) -> dict[str, Any]:
    tools = [
        parse_function_tool(tool, f"tools[{i}]")
        for i, tool in enumerate(f.array(body, "tools") or [])
    ]
    return tool_inputs(
        tools, parse_tool_choice(body.get("tool_choice")), f.boolean(body, "parallel_tool_calls")
    )


def parse_function_tool(tool: Any, path: str) -> dict[str, Any]:
    """One `tools` entry (a function tool) -> the worker's form, or a 400 naming `path`."""
    if not isinstance(tool, dict):
        raise invalid(path, f"`{path}` must be an object")
    kind = tool.get("type")
    if kind != "function":
        raise unsupported(f"{path}.type", f"tool type {kind!r} (only 'function')")
    for key in tool:
        if key not in ("type", "function"):
            raise unknown_field(f"{path}.{key}")
    function = tool.get("function")
    if not isinstance(function, dict):
        raise invalid(f"{path}.function", f"`{path}.function` must be an object")
    inner = f"{path}.function"
    for key in function:
        if key not in ("name", "description", "parameters", "strict"):
            raise unknown_field(f"{inner}.{key}")
    if function.get("strict") is not None and not isinstance(function["strict"], bool):
        raise invalid(f"{inner}.strict", f"`{inner}.strict` must be a boolean")
    # `strict` needs no flag here: forced calls are always decoded against the schema.
    return function_tool(
        function.get("name"), function.get("description"), function.get("parameters"), inner
    )


def parse_tool_choice(choice: Any) -> str | dict[str, Any] | None:
    """`tool_choice` -> the worker's form, or a 400 naming it."""
    if choice is None or choice in _CHOICES:
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function":
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise invalid("tool_choice", "`tool_choice.function.name` must be a string")
        return named_choice(name)
    if isinstance(choice, dict) and isinstance(choice.get("type"), str):
        raise unsupported("tool_choice", f"type {choice['type']!r}")
    raise invalid(
        "tool_choice",
        "`tool_choice` must be 'none', 'auto', 'required' or "
        '{"type": "function", "function": {"name": ...}}',
    )
