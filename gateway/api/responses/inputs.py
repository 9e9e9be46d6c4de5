"""Responses API `input` (a string or a list of items) -> the worker's chat messages.

Items: `message` (roles user, system, developer -> system, assistant; text parts
`input_text` / `output_text`), `function_call` (joins the assistant turn as a tool call),
`function_call_output` (a `tool` message), `reasoning` (the next assistant turn's
`reasoning_content`, from its `reasoning_text` content or else its summary), and remote MCP
tools' items: `mcp_call` (a call and its result), `mcp_approval_request` (a pending call),
`mcp_approval_response` (collected for gateway/api/responses/mcp.py), `mcp_list_tools`
(ignored: the tools are listed again). The items of one assistant turn (reasoning, text,
calls) become one assistant message, as the chat templates expect. Images, files, audio, item
references and other hosted-tool items are 400s naming the item.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.http.errors import invalid, unknown_field, unsupported
from gateway.mcp_rounds.items import APPROVAL_PREFIX

_ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}
_KEYS = {
    "message": {"type", "role", "content", "id", "status", "phase"},
    "function_call": {
        "type",
        "call_id",
        "name",
        "arguments",
        "id",
        "status",
        "caller",
        "namespace",
        "async",
    },
    "function_call_output": {
        "type",
        "call_id",
        "output",
        "id",
        "status",
        "caller",
        "name",
        "namespace",
    },
    "reasoning": {"type", "id", "summary", "content", "encrypted_content", "status"},
    # Remote MCP tools' items (gateway/mcp_rounds/), as a Response returned them.
    "mcp_list_tools": {"type", "id", "server_label", "tools", "error"},
    "mcp_call": {
        "type",
        "id",
        "server_label",
        "name",
        "arguments",
        "output",
        "error",
        "approval_request_id",
        "status",
    },
    "mcp_approval_request": {"type", "id", "server_label", "name", "arguments"},
    "mcp_approval_response": {"type", "id", "approval_request_id", "approve", "reason"},
}
_TEXT_PARTS = ("input_text", "output_text")


@dataclass(slots=True)
class InputItems:
    messages: list[dict[str, Any]]
    # `mcp_approval_response` items (with their paths) and the `mcp_approval_request` items
    # the input itself carries, by id.
    approvals: list[Approval] = field(default_factory=list)
    approval_requests: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(slots=True)
class Approval:
    """An `mcp_approval_response` item and the `tool` message that will hold the call's
    result, where the response stood in the conversation (its content filled in later)."""

    item: dict[str, Any]
    path: str
    result: dict[str, Any]


def input_items(value: Any) -> InputItems:
    if isinstance(value, str):
        return InputItems([{"role": "user", "content": value}])
    if not isinstance(value, list) or not value:
        raise invalid("input", "`input` must be a string or a non-empty array of items")
    turns = _Turns()
    for i, item in enumerate(value):
        path = f"input[{i}]"
        if not isinstance(item, dict):
            raise invalid(path, f"`{path}` must be an object")
        kind = item.get("type", "message" if "role" in item else None)
        if not isinstance(kind, str):
            raise invalid(f"{path}.type", f"`{path}.type` must be a string")
        if kind not in _KEYS:
            raise unsupported(f"{path}.type", f"input item type {kind!r}")
        for key in item:
            if key not in _KEYS[kind]:
                raise unknown_field(f"{path}.{key}")
        getattr(turns, kind)(item, path)
    messages = turns.done()
    # An approval the input already shows the call of (a replayed conversation) is done.
    approvals = [a for a in turns.approvals if a.item["approval_request_id"] not in turns.answered]
    return InputItems(messages, approvals, turns.approval_requests)


def _call_text(item: dict, path: str) -> str:
    """An mcp_call item's result as the model reads it: its output, or "Error: ..."."""
    error = item.get("error")
    if isinstance(error, dict):
        parts = error.get("content")
        texts = (
            [p.get("text", "") for p in parts if isinstance(p, dict)]
            if isinstance(parts, list)
            else []
        )
        error = error.get("message") or "\n".join(t for t in texts if isinstance(t, str))
    if isinstance(error, str) and error:
        return f"Error: {error}"
    output = item.get("output")
    if output is not None and not isinstance(output, str):
        raise invalid(f"{path}.output", f"`{path}.output` must be a string")
    return output or ""


def _str(item: dict, key: str, path: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise invalid(f"{path}.{key}", f"`{path}.{key}` must be a string")
    return value


def text_of(content: Any, path: str) -> str:
    """A string, or text parts (`input_text` / `output_text`) joined with newlines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid(path, f"`{path}` must be a string or an array of content parts")
    texts = []
    for j, part in enumerate(content):
        part_path = f"{path}[{j}]"
        if not isinstance(part, dict):
            raise invalid(part_path, f"`{part_path}` must be an object")
        kind = part.get("type")
        if not isinstance(kind, str):
            raise invalid(f"{part_path}.type", f"`{part_path}.type` must be a string")
        if kind == "refusal":
            texts.append(_str(part, "refusal", part_path))
            continue
        if kind not in _TEXT_PARTS:
            raise unsupported(f"{part_path}.type", f"content part type {kind!r}")
        texts.append(_str(part, "text", part_path))
    return "\n".join(texts)


class _Turns:
    """Accumulates messages; the open assistant turn collects reasoning, text and calls."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._assistant: dict[str, Any] | None = None
        self.approvals: list[Approval] = []
        self.approval_requests: dict[str, dict[str, Any]] = {}
        self.answered: set[str] = set()  # approval request ids whose mcp_call is in the input

    def _flush(self) -> None:
        if self._assistant is not None:
            self.messages.append(self._assistant)
            self._assistant = None

    def _turn(self, fresh: bool) -> dict[str, Any]:
        """The open assistant turn; a new one when `fresh` and the open one has output."""
        turn = self._assistant
        if turn is not None and fresh and (turn["content"] or turn.get("tool_calls")):
            self._flush()
            turn = None
        if turn is None:
            turn = self._assistant = {"role": "assistant", "content": ""}
        return turn

    def message(self, item: dict, path: str) -> None:
        role = item.get("role")
        if not isinstance(role, str) or role not in _ROLES:
            raise invalid(f"{path}.role", f"`{path}.role` must be one of {sorted(_ROLES)}")
        text = text_of(item.get("content"), f"{path}.content")
        if role == "assistant":
            self._turn(fresh=True)["content"] = text
            return
        self._flush()
        self.messages.append({"role": _ROLES[role], "content": text})

    def _call(self, call_id: str, name: str, arguments: str) -> None:
        """A tool call joins the open assistant turn."""
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        self._turn(fresh=False).setdefault("tool_calls", []).append(call)

    def _result(self, call_id: str, text: str) -> None:
        """A tool call's result: a `tool` message after the assistant turn."""
        self._flush()
        self.messages.append({"role": "tool", "content": text, "tool_call_id": call_id})

    def function_call(self, item: dict, path: str) -> None:
        self._call(
            _str(item, "call_id", path), _str(item, "name", path), _str(item, "arguments", path)
        )

    def function_call_output(self, item: dict, path: str) -> None:
        text = text_of(item.get("output"), f"{path}.output")
        self._result(_str(item, "call_id", path), text)

    def reasoning(self, item: dict, path: str) -> None:
        parts = item.get("content") or item.get("summary") or []
        if not isinstance(parts, list):
            raise invalid(f"{path}.content", f"`{path}.content` must be an array")
        texts = []
        for j, part in enumerate(parts):
            if not isinstance(part, dict) or not isinstance(part.get("text"), str):
                raise invalid(f"{path}.content[{j}]", "reasoning parts must have a string `text`")
            texts.append(part["text"])
        if any(texts):
            self._turn(fresh=True)["reasoning_content"] = "\n".join(texts)

    def mcp_list_tools(self, item: dict, path: str) -> None:
        """The tools are listed again for the new response."""

    def mcp_call(self, item: dict, path: str) -> None:
        approval = item.get("approval_request_id")
        approval = approval if isinstance(approval, str) and approval else None
        call_id = approval.removeprefix(APPROVAL_PREFIX) if approval else _str(item, "id", path)
        name, arguments = _str(item, "name", path), _str(item, "arguments", path)
        text = _call_text(item, path)
        if approval is not None and approval in self.approval_requests:
            # Its call is in the conversation with the request: the result goes where the
            # approval was given, or after the call.
            self.answered.add(approval)
            waiting = [a for a in self.approvals if a.item["approval_request_id"] == approval]
            if waiting:
                waiting[0].result["content"] = text
            else:
                self._result(call_id, text)
            return
        self._call(call_id, name, arguments)
        self._result(call_id, text)

    def mcp_approval_request(self, item: dict, path: str) -> None:
        request_id = _str(item, "id", path)
        self.approval_requests[request_id] = item
        self._call(
            request_id.removeprefix(APPROVAL_PREFIX),
            _str(item, "name", path),
            _str(item, "arguments", path),
        )

    def mcp_approval_response(self, item: dict, path: str) -> None:
        request_id = item.get("approval_request_id")
        if not isinstance(request_id, str) or not request_id:
            raise invalid(
                f"{path}.approval_request_id", f"`{path}.approval_request_id` must be a string"
            )
        if any(a.item["approval_request_id"] == request_id for a in self.approvals):
            raise invalid(
                f"{path}.approval_request_id", f"approval request {request_id!r} is answered twice"
            )
        self._flush()
        result = {
            "role": "tool",
            "content": "",
            "tool_call_id": request_id.removeprefix(APPROVAL_PREFIX),
        }
        self.messages.append(result)
        self.approvals.append(Approval(item, path, result))

    def done(self) -> list[dict[str, Any]]:
        self._flush()
        return self.messages
