"""Remote MCP tools on chat completions (an extension: OpenAI runs MCP tools on the Responses
API only). A `tools` entry `{"type": "mcp", "server_label", "server_url"?, "allowed_tools"?,
"require_approval": "never"}` (the Responses API's shape, gateway/mcp_rounds/tools.py) names a
server of the operator's `--mcp-config`; the gateway lists its tools, offers them to the model
beside the request's own functions, runs each call the model makes to one of them and feeds the
result back, round after round (gateway/mcp_rounds/rounds.py), until the model answers or calls
one of the request's own functions (then `finish_reason` is "tool_calls" and only those calls
are in the message, for the client to run).

What the client gets:

- the message: every round's text (and reasoning), rounds separated by a blank line, the last
  round's calls of the request's own functions, the last round's finish reason, usage summed
  over the rounds (each round's prompt counts);
- `mcp_items`, top level (the extension field): the `mcp_list_tools` and `mcp_call` items, as
  the Responses API returns them, in order. Streamed, each comes in a chunk of its own with no
  choices (`"choices": [], "mcp_items": [item]`) as soon as it is known; the MCP calls
  themselves never stream as `tool_calls` deltas (the client must not run them).

A chat completion cannot pause for the client's approval, so `require_approval` must be
"never" (400 otherwise); one choice (`n` 1) and text output only.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from msgspec.structs import replace
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.api.chat_completions.choice import choice_of
from gateway.api.chat_completions.chunks import ChatChunks, usage_dict
from gateway.generation import lifecycle
from gateway.generation.openai_tools import parse_function_tool, parse_tool_choice
from gateway.generation.output import ChoiceOutput
from gateway.generation.request import GenerationRequest
from gateway.http.errors import invalid, unsupported
from gateway.mcp.config import McpServer
from gateway.mcp_rounds.rounds import McpOutcome, McpRounds
from gateway.mcp_rounds.streamed import StreamedOutput, StreamedRounds, stream_rounds
from gateway.mcp_rounds.tools import McpTool, check_servers, is_mcp, parse_tools
from gateway.schema.openai_chat import FUNCTION_TOOL, TOOL_CHOICE
from gateway.schema.validate import check_value
from gateway.workers.protocol import EngineClient
from protocol.inputs import ChatInputs
from protocol.messages import Delta, FinishReason

ITEMS = "mcp_items"  # the extension field
SEPARATOR = "\n\n"  # between two rounds' texts (and reasonings)


def take_mcp_tools(body: dict[str, Any]) -> tuple[dict[str, Any], tuple[McpTool, ...], Any]:
    """The body without its `mcp` tools and, when it had some, without `tool_choice` (which
    applies once the servers' tools are listed: the worker checks a named one then); the MCP
    tools, checked; and the `tool_choice` taken out. A body without MCP tools comes back as
    it is. The function tools are checked here with their places in the body's `tools`."""
    raw = body.get("tools")
    if not isinstance(raw, list) or not any(is_mcp(t) for t in raw):
        return body, (), None
    tools = parse_tools(raw)
    for tool in tools:
        if tool.always != frozenset():
            raise unsupported(
                f"{tool.path}.require_approval",
                "approvals on chat completions (a chat completion cannot wait for one): set "
                "'never', or use the Responses API",
            )
    functions = []
    names: set[str] = set()
    for i, tool in enumerate(raw):
        if is_mcp(tool):
            continue
        path = f"tools[{i}]"  # its place in the body as sent
        check_value(path, tool, FUNCTION_TOOL)
        name = parse_function_tool(tool, path)["function"]["name"]
        if name in names:
            raise invalid(f"{path}.name", f"Tool name {name!r} is defined twice")
        names.add(name)
        functions.append(tool)
    rest = {k: v for k, v in body.items() if k not in ("tools", "tool_choice")}
    if functions:
        rest["tools"] = functions
    choice = body.get("tool_choice")
    check_value("tool_choice", choice, TOOL_CHOICE)
    if choice == "none":
        rest["tool_choice"] = choice  # nothing to call: output constraints may apply
    return rest, tools, parse_tool_choice(choice)


async def with_mcp(
    request: Request,
    engine: EngineClient,
    req: GenerationRequest,
    tools: tuple[McpTool, ...],
    choice: str | dict[str, Any] | None,
    head: dict[str, Any],
) -> Response:
    """The chat completion with MCP tools, whole or streamed; `head`: its id, created and
    model."""
    servers = {server.label: server for server in request.app.state.config.mcp_servers}
    check_servers(tools, servers)
    if req.n != 1:
        raise unsupported("n", "more than one choice with MCP tools")
    if req.audio_out is not None:
        raise unsupported("modalities", "audio output with MCP tools")
    inputs = req.inputs
    assert isinstance(inputs, ChatInputs)
    constraint = inputs.sampling.constraint
    if constraint is not None and (choice or "auto") != "none":
        named = getattr(constraint, "field", None) or "response_format"
        raise unsupported(
            named.split(".")[0],
            "an output constraint together with callable tools; set tool_choice 'none'",
        )
    lifecycle.check_max_tokens(engine, req)  # before a stream starts, as without MCP
    if choice is not None:
        req = dataclasses.replace(req, inputs=replace(inputs, tool_choice=choice))
    if req.stream:
        return await _streamed(request, engine, req, tools, servers, head)
    rounds = ChatRounds(request, engine, req, list(inputs.messages), tools, servers)
    outcome = await rounds.run((), {})
    message = rounds.message(outcome)
    return JSONResponse(
        {
            **head,
            "object": "chat.completion",
            "choices": [message],
            "usage": usage_dict(outcome.usage, req.transcribed_audio_parts),
            ITEMS: outcome.items,
        }
    )


class ChatRounds(McpRounds):
    """The rounds of one chat completion: every round's text and reasoning, joined."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._texts: list[str] = []
        self._reasonings: list[str] = []
        self._logprobs: list[Any] | None = None

    def _round_items(self, output: ChoiceOutput) -> None:
        if output.text:
            self._texts.append(output.text)
        if output.reasoning:
            self._reasonings.append(output.reasoning)
        if output.logprobs is not None:
            self._logprobs = (self._logprobs or []) + list(output.logprobs)

    def message(self, outcome: McpOutcome) -> dict[str, Any]:
        """The choice: the rounds' text, the last round's own-function calls and finish
        ("length" when the rounds were cut before the model answered its tools' results)."""
        last = outcome.last
        whole = ChoiceOutput(
            text_parts=[SEPARATOR.join(self._texts)],
            reasoning_parts=[SEPARATOR.join(self._reasonings)],
            logprobs=self._logprobs,
            finish_reason=FinishReason.LENGTH if outcome.cut else last.finish_reason,
        )
        for call in last.tool_calls:
            if not self.offers(call.name):
                whole.calls[len(whole.calls)] = call
        return choice_of(whole)


class _StreamedChatRounds(StreamedRounds, ChatRounds):
    def __init__(self, *args: Any, chunks: ChatChunks, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.chunks = chunks
        self._round_wrote = {"text": False, "reasoning": False}

    async def _generate(self, req: GenerationRequest) -> ChoiceOutput:
        self._round_wrote = {"text": False, "reasoning": False}
        self.chunks.new_round()
        return await super()._generate(req)

    def _on_output(self, delta: Delta) -> None:
        self.writes.emit(self.chunks.delta(0, self._separated(delta)))

    def _separated(self, delta: Delta) -> Delta:
        """The round's first text (and reasoning) after an earlier round's, after the blank
        line that the whole message has there."""
        changes = {}
        earlier = {"text": self._texts, "reasoning": self._reasonings}  # _round_items' record
        for kind in ("text", "reasoning"):
            piece = getattr(delta, kind)
            if piece and not self._round_wrote[kind]:
                self._round_wrote[kind] = True
                if earlier[kind]:
                    changes[kind] = SEPARATOR + piece
        return replace(delta, **changes) if changes else delta

    def _item(self, item: dict[str, Any]) -> None:
        super()._item(item)
        self.writes.emit(self.chunks.extension(ITEMS, [item]))

    def _called(self, item: dict[str, Any]) -> None:
        super()._called(item)
        self.writes.emit(self.chunks.extension(ITEMS, [item]))


async def _streamed(
    request: Request,
    engine: EngineClient,
    req: GenerationRequest,
    tools: tuple[McpTool, ...],
    servers: dict[str, McpServer],
    head: dict[str, Any],
) -> Response:
    assert isinstance(req.inputs, ChatInputs)
    chunks = ChatChunks(head["id"], head["created"], head["model"], req.include_usage, 1)
    chunks.transcribed_audio_parts = req.transcribed_audio_parts
    rounds = _StreamedChatRounds(
        request, engine, req, list(req.inputs.messages), tools, servers, chunks=chunks
    )
    chunks.hidden = rounds.offers

    async def run() -> bytes:
        outcome = await rounds.run((), {})
        last = outcome.last
        assert isinstance(last, StreamedOutput) and last.terminal is not None
        terminal = last.terminal
        if outcome.cut:
            terminal = replace(terminal, finish_reason=FinishReason.LENGTH)
        return chunks.finish(0, terminal) + chunks.end(outcome.usage)

    return await stream_rounds(
        request, rounds.writes, run, chunks.start(), chunks.keepalive, chunks.error, "request"
    )
