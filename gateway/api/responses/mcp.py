"""Remote MCP tools on the Responses API: `{"type": "mcp", "server_label", ...}` tools
(gateway/mcp_rounds/tools.py) that the server lists, offers to the model, calls and feeds back until
the model answers (gateway/mcp_rounds/rounds.py), reported as OpenAI's items.

A response with MCP tools: one `mcp_list_tools` item per server (its tools, or the error of
listing them), then each round's reasoning and message items, an `mcp_call` item per call the
server ran (its `output`, or the `error` of a server that failed, hung past the time limit or
crashed), and `function_call` items for calls of the request's own functions, which end the
response as without MCP. A call that needs approval becomes an `mcp_approval_request` item and
ends the response; the client answers in a follow-up request (`previous_response_id`) with an
`mcp_approval_response` input item (`approval_request_id`, `approve`).
"""

from __future__ import annotations

from typing import Any

from gateway.api.responses.objects import (
    ResponseMeta,
    function_call_item,
    message_item,
    new_id,
    reasoning_item,
)
from gateway.generation.output import ChoiceOutput
from gateway.http.errors import invalid
from gateway.mcp_rounds.rounds import ApprovalResponse, McpOutcome, McpRounds


def parse_approval(item: dict[str, Any], path: str, result: dict[str, Any]) -> ApprovalResponse:
    """An `mcp_approval_response` item (its `approval_request_id` checked by inputs.py)."""
    request_id = item["approval_request_id"]
    approve = item.get("approve")
    if not isinstance(approve, bool):
        raise invalid(f"{path}.approve", f"`{path}.approve` must be a boolean")
    return ApprovalResponse(request_id, approve, path, result)


class ResponseRounds(McpRounds):
    """The rounds of one Response (not streamed): its output items in order."""

    def __init__(self, *args: Any, logprobs: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._logprobs = logprobs

    def _round_items(self, output: ChoiceOutput) -> None:
        """The round's reasoning and message items, and its calls of the request's own
        functions."""
        if output.reasoning:
            self.items.append(reasoning_item(new_id("rs"), output.reasoning))
        if output.text or not output.calls:
            logprobs = output.logprobs if self._logprobs else None
            self.items.append(message_item(new_id("msg"), output.text, logprobs))
        for call in output.tool_calls:
            if call.name not in self._offered:
                self.items.append(
                    function_call_item(new_id("fc"), call.id, call.name, call.arguments)
                )


def response_of(meta: ResponseMeta, outcome: McpOutcome) -> dict[str, Any]:
    return meta.snapshot("completed", outcome.items, outcome.usage, outcome.last.finish)
