"""The MCP items of OpenAI's Responses API (`mcp_list_tools`, `mcp_call`,
`mcp_approval_request`) and the conversation's `tool` message for a call's result: the shapes
every API that runs MCP tools reports them in (chat completions as its `mcp_items` extension).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.generation.output import ToolCall, new_call_id
from gateway.mcp.client import CallResult, ListedTool

APPROVAL_PREFIX = "mcpr_"  # an approval request's id: this and the id of the call it holds
# The result of a call whose approval request the next request did not answer.
UNANSWERED = "The user did not answer this approval request; the call was not run."


def list_tools_item(label: str, tools: Sequence[ListedTool], error: str | None) -> dict[str, Any]:
    return {
        "id": new_call_id("mcpl_"),
        "type": "mcp_list_tools",
        "server_label": label,
        "tools": [
            {
                "name": t.name,
                "description": t.description,
                "input_schema": t.input_schema,
                "annotations": t.annotations,
            }
            for t in tools
        ],
        "error": error,
    }


def call_item(label: str, call: ToolCall, result: CallResult, approval_id: str | None) -> dict:
    return {
        "id": new_call_id("mcp_"),
        "type": "mcp_call",
        "server_label": label,
        "name": call.name,
        "arguments": call.arguments,
        "output": result.output,
        "error": _error_object(result),
        "approval_request_id": approval_id,
        "status": "failed" if result.error is not None else "completed",
    }


def _error_object(result: CallResult) -> dict[str, Any] | None:
    """OpenAI's shapes: the tool reported an error, or the server failed (with its code)."""
    if result.error is None:
        return None
    if result.kind == "tool":
        return {
            "type": "mcp_tool_execution_error",
            "content": [{"type": "text", "text": result.error}],
        }
    return {"type": "mcp_protocol_error", "code": result.code or -32603, "message": result.error}


def approval_item(label: str, call: ToolCall) -> dict[str, Any]:
    return {
        "id": APPROVAL_PREFIX + call.id,
        "type": "mcp_approval_request",
        "server_label": label,
        "name": call.name,
        "arguments": call.arguments,
    }


def tool_message(call_id: str, result: CallResult) -> dict[str, Any]:
    text = result.output if result.error is None else f"Error: {result.error}"
    return {"role": "tool", "tool_call_id": call_id, "content": text or ""}
