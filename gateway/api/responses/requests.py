"""Parse `POST /v1/responses` bodies into a generation request plus what the Response echoes.

Honoured: `model`, `input`, `instructions` (a system message, not carried over by
`previous_response_id`, as in OpenAI), `previous_response_id` (the stored conversation is
prepended), `store`, `max_output_tokens`, `temperature`, `top_p`, `stream`, function `tools`
and remote `mcp` tools with their approvals (gateway/mcp_rounds/),
`tool_choice`, `parallel_tool_calls`, `text.format` (JSON modes by constrained decoding),
`reasoning.effort` ("none" / "minimal" turn the template's thinking off, the others on; the
template gets it as `reasoning_effort`, which GPT-OSS's reads),
`top_logprobs` and `include: ["message.output_text.logprobs"]`, and the extensions `top_k`,
`min_p`, `repetition_penalty`, `chat_template_kwargs`. Accepted without local meaning:
`metadata` (echoed), `user`, `safety_identifier`, `prompt_cache_key`,
`prompt_cache_retention`, `prompt_cache_options`, `service_tier`, `reasoning.summary`,
`truncation: "disabled"`, `background: false`, other `include` values, `client_metadata` (an
object of strings Codex CLI sends: thread and turn ids), and `max_tool_calls`
(it caps calls of OpenAI's built-in tools, which this server has none of; function calls are
not counted, as in OpenAI). Not supported (a 400 saying so): `moderation` (no moderation
model), `conversation` (no Conversations API: use `previous_response_id`), `prompt` (no
stored prompt templates), `context_management` (no compaction). Everything else is a 400
naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.api.responses.inputs import InputItems, input_items
from gateway.api.responses.mcp import parse_approval
from gateway.api.responses.store import ResponseStore
from gateway.api.responses.surface import CREATE, LOGPROBS_INCLUDE
from gateway.generation.request import GenerationRequest
from gateway.generation.structured import check_keys, json_schema
from gateway.generation.tools import function_tool, marked_deferred, named_choice, tool_inputs
from gateway.http.errors import APIError, invalid, unsupported
from gateway.mcp_rounds.items import APPROVAL_PREFIX, UNANSWERED
from gateway.mcp_rounds.rounds import ApprovalResponse
from gateway.mcp_rounds.tools import McpTool, is_mcp, parse_tools
from gateway.schema import readers as f
from protocol.inputs import ChatInputs, Constraint, JsonObject, SamplingParams

_NO_THINKING_EFFORTS = ("none", "minimal")
_TOOL_KEYS = {
    "type", "name", "description", "parameters", "strict", "defer_loading", "allowed_callers",
}  # fmt: skip


@dataclass(slots=True)
class ResponsesRequest:
    generation: GenerationRequest
    conversation: list[dict[str, Any]]  # history + this input, without the instructions
    store: bool
    logprobs: bool  # logprobs in output_text parts
    echo: dict[str, Any] = field(default_factory=dict)  # request fields the Response repeats
    # Remote MCP tools (gateway/mcp_rounds/), the approvals this input answers and
    # the approval requests they answer, by id.
    mcp: tuple[McpTool, ...] = ()
    approvals: tuple[ApprovalResponse, ...] = ()
    approval_requests: dict[str, dict[str, Any]] = field(default_factory=dict)


def parse_create(body: dict, store: ResponseStore, default_max_tokens: int) -> ResponsesRequest:
    CREATE.check(body)
    model = f.string(body, "model")
    assert model is not None  # required by the table
    previous = f.string(body, "previous_response_id")
    history: list[dict[str, Any]] = []
    earlier_output: list[dict[str, Any]] = []
    if previous is not None:
        stored = store.get(previous)
        if stored is None:
            raise APIError(
                400,
                f"Previous response with id {previous!r} not found (responses are kept in memory, "
                f"the last {store.capacity})",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        history = stored.conversation
        earlier_output = stored.response.get("output") or []
    items = input_items(body.get("input"))
    conversation = history + items.messages
    instructions = f.string(body, "instructions")
    system = [{"role": "system", "content": instructions}] if instructions else []
    kwargs = dict(f.obj(body, "chat_template_kwargs") or {})
    _reasoning(body, kwargs)
    inputs: dict[str, Any] = {"messages": system + conversation, "chat_template_kwargs": kwargs}
    raw_tools = f.array(body, "tools") or []
    mcp_tools = parse_tools(raw_tools)
    tools = [_tool(t, f"tools[{i}]") for i, t in enumerate(raw_tools) if not is_mcp(t)]
    approvals, requested = _approvals(items, earlier_output, mcp_tools)
    unanswered = _unanswered(earlier_output, approvals)
    if unanswered:  # every call in the history gets a result, or templates refuse it
        conversation = history + unanswered + items.messages
        inputs["messages"] = system + conversation
    choice = _tool_choice(body.get("tool_choice"), mcp_tools, bool(tools))
    if mcp_tools:
        # The MCP servers' tools join after they are listed (gateway/mcp_rounds/):
        # a forced choice is checked by the worker then.
        inputs.update(tool_inputs(tools, None, f.boolean(body, "parallel_tool_calls")))
        if choice is not None:
            inputs["tool_choice"] = choice
    else:
        inputs.update(tool_inputs(tools, choice, f.boolean(body, "parallel_tool_calls")))
    logprobs = _logprobs(body)
    max_tokens = f.integer(body, "max_output_tokens")
    sampling = SamplingParams(
        max_tokens=max_tokens or default_max_tokens,
        # Ranges checked by the table (gateway/api/responses/surface.CREATE).
        temperature=f.plain_number(body, "temperature"),
        top_p=f.plain_number(body, "top_p"),
        top_k=f.top_k(body),
        min_p=f.plain_number(body, "min_p"),
        repetition_penalty=f.plain_number(body, "repetition_penalty"),
        logprobs=logprobs,
        constraint=_text_format(body),
    )
    if sampling.constraint is not None and tools and inputs.get("tool_choice") != "none":
        raise unsupported("text.format", "a JSON format together with callable tools")
    stream, _ = f.stream_flags(body)
    generation = GenerationRequest(
        model,
        ChatInputs(sampling=sampling, **inputs),
        stream,
        max_tokens_field="max_output_tokens" if max_tokens else None,
    )
    store_it = f.boolean(body, "store") is not False
    echo = {
        "instructions": instructions,
        "max_output_tokens": max_tokens,
        "metadata": f.obj(body, "metadata") or {},
        "parallel_tool_calls": inputs.get("parallel_tool_calls", True),
        "previous_response_id": previous,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "tool_choice": _echo_choice(choice, body.get("tool_choice")),
        "tools": [_echo_tool(tool) for tool in body.get("tools") or []],
        "text": {"format": (body.get("text") or {}).get("format") or {"type": "text"}},
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": store_it,
        "top_logprobs": f.integer(body, "top_logprobs"),
        "truncation": "disabled",
    }
    if f.string(body, "user") is not None:  # a string in the API's schema: absent, not null
        echo["user"] = body["user"]
    return ResponsesRequest(
        generation,
        conversation,
        store_it,
        logprobs is not None,
        echo,
        mcp_tools,
        approvals,
        requested,
    )


def _approvals(
    items: InputItems, earlier_output: list[dict[str, Any]], mcp_tools: tuple[McpTool, ...]
) -> tuple[tuple[ApprovalResponse, ...], dict[str, dict[str, Any]]]:
    """The input's approval responses, each matched with the request it answers (from the
    input or the previous response's output) and with an `mcp` tool of its server."""
    known = {
        item["id"]: item
        for item in earlier_output
        if item.get("type") == "mcp_approval_request" and isinstance(item.get("id"), str)
    }
    known.update(items.approval_requests)
    approvals, requested = [], {}
    labels = {tool.label for tool in mcp_tools}
    for given in items.approvals:
        path = given.path
        approval = parse_approval(given.item, path, given.result)
        asked = known.get(approval.request_id)
        if asked is None:
            raise invalid(
                f"{path}.approval_request_id",
                f"no approval request {approval.request_id!r} in the input or the previous "
                "response",
            )
        if asked.get("server_label") not in labels:
            raise invalid(
                f"{path}.approval_request_id",
                f"approval request {approval.request_id!r} is for MCP server "
                f"{asked.get('server_label')!r}, which this request's tools do not name",
            )
        approvals.append(approval)
        requested[approval.request_id] = asked
    return tuple(approvals), requested


def _unanswered(
    earlier_output: list[dict[str, Any]], approvals: tuple[ApprovalResponse, ...]
) -> list[dict[str, Any]]:
    """The previous response's approval requests this input does not answer, as the results
    of their calls (not run): the previous response's conversation ends with those calls."""
    answered = {approval.request_id for approval in approvals}
    return [
        {
            "role": "tool",
            "tool_call_id": item["id"].removeprefix(APPROVAL_PREFIX),
            "content": UNANSWERED,
        }
        for item in earlier_output
        if item.get("type") == "mcp_approval_request"
        and isinstance(item.get("id"), str)
        and item["id"] not in answered
    ]


def _reasoning(body: dict, kwargs: dict[str, Any]) -> None:
    reasoning = f.obj(body, "reasoning")
    if reasoning is None:
        return
    check_keys(reasoning, {"effort", "summary", "generate_summary"}, "reasoning")
    effort = reasoning.get("effort")
    if effort is not None:
        if not isinstance(effort, str):
            raise invalid("reasoning.effort", "`reasoning.effort` must be a string")
        kwargs.setdefault("enable_thinking", effort not in _NO_THINKING_EFFORTS)
        kwargs.setdefault("reasoning_effort", effort)  # what GPT-OSS's template reads


def _tool(tool: Any, path: str) -> dict[str, Any]:
    """A function tool in the worker's shape, a deferred one marked so (`marked_deferred`)."""
    if not isinstance(tool, dict):
        raise invalid(path, f"`{path}` must be an object")
    if tool.get("type") != "function":
        raise unsupported(f"{path}.type", f"tool type {tool.get('type')!r} (only 'function')")
    check_keys(tool, _TOOL_KEYS, path)
    checked = function_tool(tool.get("name"), tool.get("description"), tool.get("parameters"), path)
    return marked_deferred(checked, tool, path)


def _echo_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A (checked) request tool as the Response repeats it, with the fields FunctionTool
    (or Mcp) requires even when the request left them out."""
    if tool.get("type") == "mcp":
        return {
            "type": "mcp",
            "server_label": tool["server_label"],
            "server_url": tool.get("server_url"),
            "server_description": tool.get("server_description"),
            "allowed_tools": tool.get("allowed_tools"),
            "require_approval": tool.get("require_approval", "always"),
            "headers": None,
        }
    return {
        "type": "function",
        "name": tool["name"],
        "description": tool.get("description"),
        "parameters": tool.get("parameters"),
        "strict": tool.get("strict"),
        **{k: v for k, v in tool.items() if k in ("defer_loading", "allowed_callers")},
    }


def _tool_choice(
    choice: Any, mcp_tools: tuple[McpTool, ...] = (), functions: bool = False
) -> str | dict[str, Any] | None:
    if choice is None or choice in ("none", "auto", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "mcp":
        return _mcp_choice(choice, mcp_tools, functions)
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = choice.get("name")
        if not isinstance(name, str) or not name:
            raise invalid("tool_choice.name", "`tool_choice.name` must be a string")
        return named_choice(name)
    if isinstance(choice, dict):
        raise unsupported("tool_choice", f"type {choice.get('type')!r}")
    raise invalid("tool_choice", "`tool_choice` must be 'none', 'auto', 'required' or a function")


def _mcp_choice(
    choice: dict[str, Any], mcp_tools: tuple[McpTool, ...], functions: bool
) -> str | dict[str, Any]:
    """`{"type": "mcp", "server_label", "name"}`: a call of that tool (a named function once
    listed); without a name, a call of any tool, which is that server's only when it is the
    request's one source of tools."""
    label = choice.get("server_label")
    if label not in {tool.label for tool in mcp_tools}:
        raise invalid(
            "tool_choice.server_label",
            f"`tool_choice.server_label` {label!r} is not the label of one of the `mcp` tools",
        )
    name = choice.get("name")
    if name is not None:
        if not isinstance(name, str) or not name:
            raise invalid("tool_choice.name", "`tool_choice.name` must be a string")
        return named_choice(name)
    if functions or len(mcp_tools) > 1:
        raise invalid(
            "tool_choice.name",
            "an `mcp` tool_choice without `name` is only enforced when that server is the "
            "request's only source of tools: name the tool",
        )
    return "required"


def _echo_choice(choice: str | dict[str, Any] | None, given: Any = None) -> Any:
    if isinstance(given, dict) and given.get("type") == "mcp":
        return {"type": "mcp", "server_label": given["server_label"], "name": given.get("name")}
    if isinstance(choice, dict):
        return {"type": "function", "name": choice["function"]["name"]}
    return choice or "auto"


def _logprobs(body: dict) -> int | None:
    include = body.get("include") or []  # strings (the table)
    top = f.integer(body, "top_logprobs")
    if LOGPROBS_INCLUDE in include or top is not None:
        return top or 0
    return None


def _text_format(body: dict) -> Constraint | None:
    text = f.obj(body, "text")
    if text is None:
        return None
    check_keys(text, {"format", "verbosity"}, "text")
    if text.get("verbosity") is not None:
        raise unsupported("text.verbosity")
    spec = text.get("format")
    if spec is None:
        return None
    path = "text.format"
    if not isinstance(spec, dict):
        raise invalid(path, "`text.format` must be an object")
    kind = spec.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return JsonObject()
    if kind == "json_schema":
        check_keys(spec, {"type", "name", "schema", "strict", "description"}, path)
        if not isinstance(spec.get("schema"), dict):
            raise invalid(f"{path}.schema", "`text.format.schema` must be a JSON Schema object")
        return json_schema(spec["schema"], spec.get("name"), spec.get("strict"), path)
    raise invalid(
        f"{path}.type", "`text.format.type` must be 'text', 'json_object' or 'json_schema'"
    )
