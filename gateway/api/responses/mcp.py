"""Remote MCP tools on the Responses API: `{"type": "mcp", "server_label", ...}` tools that the
server lists, offers to the model, calls and feeds back until the model answers.

OpenAI's shape: the tool names a server (`server_label`, optionally its `server_url`), may
narrow its tools (`allowed_tools`: names, or `{"tool_names", "read_only"}`) and says which
calls need the client's approval (`require_approval`: "always" (the default), "never", or
`{"always" | "never": {"tool_names": [...]}}`). Only servers the operator listed in
`--mcp-config` can be named (gateway/mcp/config.py); a `server_url` must be the one listed.

A response with MCP tools: one `mcp_list_tools` item per server (its tools, or the error of
listing them), then rounds of generation. The model sees the servers' tools as function tools
(beside the request's own); each call it makes to one of them is run by the server and becomes
an `mcp_call` item (its `output`, or the `error` of a server that failed, hung past the time
limit or crashed), fed back to the model as the tool's result, and the next round begins, up
to MAX_ROUNDS rounds. A call that needs approval becomes an `mcp_approval_request` item and
ends the response; the client answers in a follow-up request (`previous_response_id`) with an
`mcp_approval_response` input item (`approval_request_id`, `approve`), and the approved call is
run (a declined one is reported to the model as declined) before generation goes on. A round
that calls one of the request's own functions ends the response with its `function_call`
items, as without MCP. `tool_choice` "required", a named function or an `mcp` choice (`{"type":
"mcp", "server_label", "name"}`: that tool) applies to the first round.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from msgspec.structs import replace
from starlette.requests import Request

from gateway.api.responses.inputs import APPROVAL_PREFIX
from gateway.api.responses.objects import (
    ResponseMeta,
    assistant_turn,
    function_call_item,
    message_item,
    new_id,
    reasoning_item,
)
from gateway.generation import lifecycle
from gateway.generation.output import ChoiceOutput, ToolCall
from gateway.generation.request import GenerationRequest
from gateway.generation.tools import function_tool
from gateway.http.disconnect import DisconnectWatcher
from gateway.http.errors import APIError, invalid, unsupported
from gateway.mcp.client import CallResult, ListedTool, McpConnections
from gateway.mcp.config import McpServer
from gateway.workers.protocol import EngineClient
from protocol.inputs import ChatInputs
from protocol.messages import Usage

MAX_ROUNDS = 8
T = TypeVar("T")
DECLINED = "The user declined this call."
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


@dataclass(frozen=True, slots=True)
class ApprovalResponse:
    request_id: str
    approve: bool
    path: str
    # The conversation's `tool` message for the call's result, where the approval stood.
    result: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class McpOutcome:
    """What the rounds produced: the Response's items, usage summed over the rounds, the last
    round's output (its finish reason) and the conversation to store."""

    items: list[dict[str, Any]]
    usage: Usage
    last: ChoiceOutput
    conversation: list[dict[str, Any]] = field(default_factory=list)


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


def parse_approval(item: dict[str, Any], path: str, result: dict[str, Any]) -> ApprovalResponse:
    """An `mcp_approval_response` item (its `approval_request_id` checked by inputs.py)."""
    request_id = item["approval_request_id"]
    approve = item.get("approve")
    if not isinstance(approve, bool):
        raise invalid(f"{path}.approve", f"`{path}.approve` must be a boolean")
    return ApprovalResponse(request_id, approve, path, result)


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


def list_tools_item(label: str, tools: Sequence[ListedTool], error: str | None) -> dict[str, Any]:
    return {
        "id": new_id("mcpl"),
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
        "id": new_id("mcp"),
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


class McpRounds:
    """One Response's MCP tools and rounds (not streamed)."""

    def __init__(
        self,
        request: Request,
        engine: EngineClient,
        generation: GenerationRequest,
        conversation: list[dict[str, Any]],
        tools: Sequence[McpTool],
        servers: Mapping[str, McpServer],
        logprobs: bool,
    ) -> None:
        self._request = request
        self._engine = engine
        self._generation = generation
        self._conversation = list(conversation)
        self._tools = tools
        self._servers = servers
        self._logprobs = logprobs
        self._offered: dict[str, McpTool] = {}  # function name -> its MCP tool
        self._items: list[dict[str, Any]] = []
        self._usages: list[Usage] = []
        self._start_length = len(conversation)  # what the request's messages end with

    @property
    def conversation(self) -> list[dict[str, Any]]:
        """The conversation so far (the request's, then each round's turns and results)."""
        return self._conversation

    async def run(
        self, approvals: Sequence[ApprovalResponse], requested: Mapping[str, dict[str, Any]]
    ) -> McpOutcome:
        """`requested`: the approval requests the approvals answer, by id."""
        async with McpConnections({t.label: self._servers[t.label] for t in self._tools}) as mcp:
            functions = await self._list(mcp)
            for approval in approvals:
                await self._answer(mcp, approval, requested[approval.request_id])
            inputs = self._generation.inputs
            assert isinstance(inputs, ChatInputs)
            system = inputs.messages[: len(inputs.messages) - self._start_length]
            tools = [*inputs.tools, *functions]
            choice = inputs.tool_choice
            budget = inputs.sampling.max_tokens  # max_output_tokens: the rounds' together
            for _ in range(MAX_ROUNDS):
                round_inputs = replace(
                    inputs,
                    messages=system + self._conversation,
                    tools=tools,
                    tool_choice=choice,
                    sampling=replace(inputs.sampling, max_tokens=budget),
                )
                output = await self._generate(_with_inputs(self._generation, round_inputs))
                if output.usage is not None:
                    self._usages.append(output.usage)
                    budget -= output.usage.completion_tokens
                if not await self._after_round(mcp, output) or budget < 1:
                    break
                if choice == "required" or isinstance(choice, dict):
                    choice = "auto"  # a forced choice applies to the first round
            return McpOutcome(self._items, _summed(self._usages), output, self._conversation)

    # -- what the streamed variant (mcp_run.py) does otherwise --------------------------

    async def _generate(self, req: GenerationRequest) -> ChoiceOutput:
        """One round's output."""
        return (await lifecycle.complete(self._request, self._engine, req)).choices[0]

    def _item(self, item: dict[str, Any]) -> None:
        """A finished MCP item (tools listed, approval asked)."""
        self._items.append(item)

    def _round_items(self, output: ChoiceOutput) -> None:
        """The round's reasoning and message items, and its calls of the request's own
        functions."""
        if output.reasoning:
            self._items.append(reasoning_item(new_id("rs"), output.reasoning))
        if output.text or not output.calls:
            logprobs = output.logprobs if self._logprobs else None
            self._items.append(message_item(new_id("msg"), output.text, logprobs))
        for call in output.tool_calls:
            if call.name not in self._offered:
                self._items.append(
                    function_call_item(new_id("fc"), call.id, call.name, call.arguments)
                )

    async def _watched(self, work: Awaitable[T]) -> T:
        """MCP work between the rounds (a listing, a call): a client that leaves cancels it
        (a round's generation has its own watcher, in lifecycle.complete)."""
        watcher = DisconnectWatcher(self._request.receive)
        try:
            return await watcher.run(work)
        finally:
            watcher.close()

    def _calling(self, label: str, call: ToolCall, approval_id: str | None) -> None:
        """An MCP call is about to run."""

    def _called(self, item: dict[str, Any]) -> None:
        """An MCP call ran (`item`: its mcp_call item)."""
        self._items.append(item)

    # ----------------------------------------------------------------------------------------

    async def _list(self, mcp: McpConnections) -> list[dict[str, Any]]:
        functions = []
        own = {t["function"]["name"] for t in self._generation.inputs.tools}  # type: ignore[union-attr]
        for tool in self._tools:
            listed, error = await self._watched(mcp.list_tools(tool.label))
            offered = [t for t in listed if tool.offers(t)]
            kept, left_out = [], []
            for t in offered:
                try:
                    if t.name in own or t.name in self._offered:
                        raise ValueError("its name is another tool's of this request")
                    path = f"{tool.path}.tools.{t.name}"
                    functions.append(function_tool(t.name, t.description, t.input_schema, path))
                except (ValueError, APIError) as exc:
                    reason = exc.message if isinstance(exc, APIError) else str(exc)
                    left_out.append(f"{t.name} ({reason})")
                    continue
                self._offered[t.name] = tool
                kept.append(t)
            if left_out:
                note = "left out: " + "; ".join(left_out)
                error = f"{error}; {note}" if error else note
            self._item(list_tools_item(tool.label, kept, error))
        return functions

    async def _answer(
        self, mcp: McpConnections, approval: ApprovalResponse, requested: dict[str, Any]
    ) -> None:
        call_id = approval.request_id.removeprefix(APPROVAL_PREFIX)
        call = ToolCall(call_id, requested["name"], requested["arguments"])
        label = requested["server_label"]
        tool = self._offered.get(call.name)
        if not approval.approve:
            result = CallResult(DECLINED, None)
        elif tool is None or tool.label != label:
            # Approved, but not a tool this request's mcp tools offer (its allowed_tools): not run.
            result = CallResult(None, f"{call.name} on {label!r} is not offered to this response")
        else:
            self._calling(label, call, approval.request_id)
            result = await self._watched(_call(mcp, label, call))
            self._called(call_item(label, call, result, approval.request_id))
        approval.result.update(tool_message(call_id, result))

    async def _after_round(self, mcp: McpConnections, output: ChoiceOutput) -> bool:
        """Adds the round's items; runs its MCP calls; True when another round follows."""
        self._round_items(output)
        self._conversation.append(assistant_turn(output))
        calls = output.tool_calls
        if not calls:
            return False
        go_on = True
        for call in calls:
            tool = self._offered.get(call.name)
            if tool is None:  # one of the request's own functions: the client runs it
                go_on = False
            elif tool.needs_approval(call.name):
                self._item(approval_item(tool.label, call))
                go_on = False
            else:
                self._calling(tool.label, call, None)
                result = await self._watched(_call(mcp, tool.label, call))
                self._called(call_item(tool.label, call, result, None))
                self._conversation.append(tool_message(call.id, result))
        return go_on


async def _call(mcp: McpConnections, label: str, call: ToolCall) -> CallResult:
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        return CallResult(None, f"the arguments of {call.name} are not JSON")
    if not isinstance(arguments, dict):
        return CallResult(None, f"the arguments of {call.name} are not a JSON object")
    return await mcp.call_tool(label, call.name, arguments)


def _with_inputs(generation: GenerationRequest, inputs: ChatInputs) -> GenerationRequest:
    return dataclasses.replace(generation, inputs=inputs)


def _summed(usages: Sequence[Usage]) -> Usage:
    """Usage over the rounds: each round's prompt counts, as each was a model call."""
    return Usage(
        prompt_tokens=sum(u.prompt_tokens for u in usages),
        completion_tokens=sum(u.completion_tokens for u in usages),
        cached_tokens=sum(u.cached_tokens for u in usages),
        reasoning_tokens=sum(u.reasoning_tokens for u in usages),
    )


def response_of(meta: ResponseMeta, outcome: McpOutcome) -> dict[str, Any]:
    return meta.snapshot("completed", outcome.items, outcome.usage, outcome.last.finish)
