"""The rounds of a request with remote MCP tools: the servers' tools are listed and offered
to the model as function tools (beside the request's own), each call the model makes to one of
them is run by the gateway and fed back as the tool's result, and the next round begins, until
the model answers, calls one of the request's own functions, asks for a call that needs the
client's approval, or MAX_ROUNDS rounds or the request's max tokens are spent.

The loop is the same for every API; what each API makes of it (its items, its stream) is a
subclass's: the hooks below `run` (gateway/api/responses/mcp.py for the Responses API,
gateway/api/chat_completions/mcp.py for chat completions). A call that needs approval is
reported as an `mcp_approval_request` item and ends the rounds; the client answers in a
follow-up request (the Responses API's `mcp_approval_response` input items), and the approved
call is run (a declined one is reported to the model as declined) before generation goes on.
`tool_choice` "required", a named function or an `mcp` choice applies to the first round.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from msgspec.structs import replace
from starlette.requests import Request

from gateway.generation import lifecycle
from gateway.generation.output import ChoiceOutput, ToolCall, assistant_turn
from gateway.generation.request import GenerationRequest
from gateway.generation.tools import function_tool
from gateway.http.disconnect import DisconnectWatcher
from gateway.http.errors import APIError
from gateway.mcp.client import CallResult, McpConnections
from gateway.mcp.config import McpServer
from gateway.mcp_rounds.items import (
    APPROVAL_PREFIX,
    approval_item,
    call_item,
    list_tools_item,
    tool_message,
)
from gateway.mcp_rounds.tools import McpTool
from gateway.media.resolve import media_settings, resolve_media
from gateway.workers.protocol import EngineClient
from protocol.inputs import ChatInputs
from protocol.messages import Usage

MAX_ROUNDS = 8
T = TypeVar("T")
DECLINED = "The user declined this call."


@dataclass(frozen=True, slots=True)
class ApprovalResponse:
    request_id: str
    approve: bool
    path: str
    # The conversation's `tool` message for the call's result, where the approval stood.
    result: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class McpOutcome:
    """What the rounds produced: their items (the MCP ones, and what the API's `_round_items`
    added), usage summed over the rounds, the last round's output (its finish reason) and the
    conversation so far."""

    items: list[dict[str, Any]]
    usage: Usage
    last: ChoiceOutput
    conversation: list[dict[str, Any]] = field(default_factory=list)
    # The rounds ended (MAX_ROUNDS or max tokens spent) right after MCP results the model has
    # not answered yet.
    cut: bool = False


class McpRounds:
    """One request's MCP tools and rounds (not streamed; its items kept in `items`)."""

    def __init__(
        self,
        request: Request,
        engine: EngineClient,
        generation: GenerationRequest,
        conversation: list[dict[str, Any]],
        tools: Sequence[McpTool],
        servers: Mapping[str, McpServer],
    ) -> None:
        self._request = request
        self._engine = engine
        self._generation = generation
        self._conversation = list(conversation)
        self._tools = tools
        self._servers = servers
        self._offered: dict[str, McpTool] = {}  # function name -> its MCP tool
        self.items: list[dict[str, Any]] = []
        self._usages: list[Usage] = []
        self._start_length = len(conversation)  # what the request's messages end with

    def offers(self, name: str) -> bool:
        """Whether `name` is one of the MCP tools offered to the model (run here, not by the
        client)."""
        return name in self._offered

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
            generation = self._generation
            if generation.media:  # resolved (fetched) once, for every round
                settings = media_settings(self._request)
                media = await self._watched(resolve_media(generation.media, settings))
                generation = _with_inputs(generation, generation.choices(media)[0], media=())
            inputs = generation.inputs
            assert isinstance(inputs, ChatInputs)
            system = inputs.messages[: len(inputs.messages) - self._start_length]
            tools = [*inputs.tools, *functions]
            choice = inputs.tool_choice
            budget = inputs.sampling.max_tokens  # max_output_tokens: the rounds' together
            cut = False
            for _ in range(MAX_ROUNDS):
                round_inputs = replace(
                    inputs,
                    messages=system + self._conversation,
                    tools=tools,
                    tool_choice=choice,
                    sampling=replace(inputs.sampling, max_tokens=budget),
                )
                output = await self._generate(_with_inputs(generation, round_inputs))
                if output.usage is not None:
                    self._usages.append(output.usage)
                    budget -= output.usage.completion_tokens
                cut = await self._after_round(mcp, output)
                if not cut or budget < 1:
                    break
                if choice == "required" or isinstance(choice, dict):
                    choice = "auto"  # a forced choice applies to the first round
            usage = _summed(self._usages)
            return McpOutcome(self.items, usage, output, self._conversation, cut)

    # -- what an API's variant does otherwise ------------------------------------------------

    async def _generate(self, req: GenerationRequest) -> ChoiceOutput:
        """One round's output."""
        return (await lifecycle.complete(self._request, self._engine, req)).choices[0]

    def _item(self, item: dict[str, Any]) -> None:
        """A finished MCP item (tools listed, approval asked)."""
        self.items.append(item)

    def _round_items(self, output: ChoiceOutput) -> None:
        """What the API makes of a round's own output (its text, reasoning and calls)."""

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
        self.items.append(item)

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


def _with_inputs(generation: GenerationRequest, inputs: Any, **changes: Any) -> GenerationRequest:
    return dataclasses.replace(generation, inputs=inputs, **changes)


def _summed(usages: Sequence[Usage]) -> Usage:
    """Usage over the rounds: each round's prompt counts, as each was a model call."""
    return Usage(
        prompt_tokens=sum(u.prompt_tokens for u in usages),
        completion_tokens=sum(u.completion_tokens for u in usages),
        cached_tokens=sum(u.cached_tokens for u in usages),
        reasoning_tokens=sum(u.reasoning_tokens for u in usages),
    )
