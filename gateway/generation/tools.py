"""Function tools and tool choice in the worker's shape, shared by all three APIs.

The worker takes OpenAI-style tools, `[{"type": "function", "function": {"name", "description",
"parameters"}}]`, and `tool_choice` "auto" | "none" | "required" | {"type": "function",
"function": {"name"}}; "required" and a named function are enforced by constrained decoding in
the worker. Each API's parser reads its own spelling and builds these with the helpers below,
which check what every API requires: names are unique non-empty strings, parameters are JSON
Schema objects, and a forced choice names a tool that exists.
"""

from __future__ import annotations

from typing import Any

from gateway.http.errors import invalid

MAX_NAME_LENGTH = 128
_EMPTY_PARAMETERS = {"type": "object", "properties": {}}


def function_tool(
    name: Any, description: Any, parameters: Any, path: str, parameters_key: str = "parameters"
) -> dict[str, Any]:
    """One tool in the worker's shape; `path` names the tool in errors (e.g. `tools[2]`)."""
    if not isinstance(name, str) or not name:
        raise invalid(f"{path}.name", f"`{path}.name` must be a non-empty string")
    if len(name) > MAX_NAME_LENGTH:
        raise invalid(f"{path}.name", f"`{path}.name` is longer than {MAX_NAME_LENGTH} characters")
    if description is not None and not isinstance(description, str):
        raise invalid(f"{path}.description", f"`{path}.description` must be a string")
    if parameters is not None and not isinstance(parameters, dict):
        raise invalid(
            f"{path}.{parameters_key}", f"`{path}.{parameters_key}` must be a JSON Schema object"
        )
    function: dict[str, Any] = {"name": name}
    if description:
        function["description"] = description
    function["parameters"] = parameters if parameters is not None else dict(_EMPTY_PARAMETERS)
    return {"type": "function", "function": function}


def marked_deferred(
    tool: dict[str, Any], request_tool: dict[str, Any], path: str
) -> dict[str, Any]:
    """`tool` (function_tool's) marked `defer_loading` when the request's tool says so
    (Anthropic's and OpenAI's tool search): its definition stays out of the model's context
    until a tool search loads it, and this server runs no tool search, so `tool_inputs`
    leaves it out of the prompt, and it cannot be called."""
    return {**tool, "defer_loading": True} if defer_loading(request_tool, path) else tool


def defer_loading(request_tool: dict[str, Any], path: str) -> bool:
    """A request tool's `defer_loading` (default false); a 400 naming it unless a boolean."""
    deferred = request_tool.get("defer_loading", False)
    if not isinstance(deferred, bool):
        raise invalid(f"{path}.defer_loading", f"`{path}.defer_loading` must be a boolean")
    return deferred


def named_choice(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def tool_inputs(
    tools: list[dict[str, Any]],
    choice: str | dict[str, Any] | None,
    parallel: bool | None,
    *,
    tools_param: str = "tools",
    choice_param: str = "tool_choice",
) -> dict[str, Any]:
    """The worker inputs' `tools`, `tool_choice` and `parallel_tool_calls` (only those set);
    tools marked deferred (`marked_deferred`) are checked with the others and left out."""
    names = [tool["function"]["name"] for tool in tools]
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise invalid(f"{tools_param}[{i}].name", f"Tool name {name!r} is defined twice")
        seen.add(name)
    deferred = {tool["function"]["name"] for tool in tools if tool.get("defer_loading")}
    if isinstance(choice, dict) and choice["function"]["name"] in deferred:
        raise invalid(
            choice_param,
            f"`{choice_param}` names the tool {choice['function']['name']!r}, which is deferred "
            "(`defer_loading: true`); no tool search runs here to load it",
        )
    tools = [tool for tool in tools if not tool.get("defer_loading")]
    seen -= deferred
    inputs: dict[str, Any] = {}
    if tools:
        inputs["tools"] = tools
    if choice is not None:
        if isinstance(choice, dict):
            name = choice["function"]["name"]
            if name not in seen:
                raise invalid(
                    choice_param,
                    f"`{choice_param}` names the tool {name!r}, which is not in `{tools_param}`",
                )
        elif choice == "required" and not tools:
            raise invalid(choice_param, f"`{choice_param}` 'required' needs at least one tool")
        if tools:  # without tools, "auto" and "none" mean the same: nothing to call
            inputs["tool_choice"] = choice
    if parallel is not None:
        inputs["parallel_tool_calls"] = parallel
    return inputs
