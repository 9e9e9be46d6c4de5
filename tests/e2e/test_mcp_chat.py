"""Remote MCP tools on chat completions (the `mcp` tools extension,
gateway/api/chat_completions/mcp.py), through the real server and a real MCP server.

The model is the scripted tiny Qwen3 (worker/tiny_models/scripted.py): forced to call a tool
it calls `llm_time` (or the only tool it is offered), and after a tool result it thinks and
answers ANSWER. The MCP server is tests/support/mcp_server.py on the official `mcp` SDK,
started over stdio by the gateway as `--mcp-config` lists it.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import openai
import pytest

from tests.support.mcp_server import TIME, running_under, start_gateway
from tests.support.server import model_name, openai_client
from worker.tiny_models import ensure_checkpoint
from worker.tiny_models.scripted import ANSWER, THINKING

NEVER = {"type": "mcp", "server_label": "tools", "require_approval": "never"}
QUESTION = [{"role": "user", "content": "What time is it?"}]
FUNCTION = {"type": "function", "function": {"name": "get_weather"}}


@pytest.fixture(scope="module")
def scripted_path() -> str:
    return str(ensure_checkpoint("qwen3_scripted"))


@pytest.fixture(scope="module")
def server(start_server, tmp_path_factory):
    return start_gateway(start_server, tmp_path_factory, "mcp-chat")


def chat(server, path, **fields):
    fields.setdefault("messages", QUESTION)
    fields.setdefault("max_tokens", 64)
    fields.setdefault("temperature", 0)
    return openai_client(server).chat.completions.create(model=model_name(path), **fields)


def joined(stream):
    """A streamed chat completion's text, reasoning, finish reason, usage and MCP items."""
    text, reasoning, finish, usage, items, calls = "", "", None, None, [], {}
    for chunk in stream:
        items += (chunk.model_extra or {}).get("mcp_items") or []
        usage = chunk.usage or usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            reasoning += (choice.delta.model_extra or {}).get("reasoning_content") or ""
            finish = choice.finish_reason or finish
            for piece in choice.delta.tool_calls or []:
                call = calls.setdefault(piece.index, {"name": "", "arguments": ""})
                call["name"] += piece.function.name or ""
                call["arguments"] += piece.function.arguments or ""
    return text, reasoning, finish, usage, items, list(calls.values())


def without_ids(items):
    return [{k: v for k, v in item.items() if k != "id"} for item in items]


def test_the_server_runs_the_call_and_the_model_answers_with_its_result(server, scripted_path):
    response = chat(server, scripted_path, tools=[NEVER], tool_choice="required")
    (choice,) = response.choices
    assert (choice.message.content, choice.finish_reason) == (ANSWER, "stop")
    assert choice.message.tool_calls is None  # the MCP call was the server's, not the client's
    # Both rounds' reasoning, a blank line between them.
    assert choice.message.model_extra["reasoning_content"] == f"{THINKING}\n\n{THINKING}"
    listed, call = response.model_extra["mcp_items"]
    assert listed["type"] == "mcp_list_tools" and listed["error"] is None
    assert "llm_time" in [t["name"] for t in listed["tools"]]
    assert (call["type"], call["name"], call["output"], call["error"]) == (
        "mcp_call",
        "llm_time",
        TIME,
        None,
    )
    # Usage over both rounds: the second prompt holds the first round and the tool's result.
    one = chat(server, scripted_path, tools=[NEVER], max_tokens=1)
    assert response.usage.prompt_tokens > 2 * one.usage.prompt_tokens


def test_streamed_joined_equals_whole_and_the_mcp_call_never_streams(server, scripted_path):
    whole = chat(server, scripted_path, tools=[NEVER], tool_choice="required")
    stream = chat(
        server,
        scripted_path,
        tools=[NEVER],
        tool_choice="required",
        stream=True,
        stream_options={"include_usage": True},
    )
    text, reasoning, finish, usage, items, calls = joined(stream)
    message = whole.choices[0].message
    assert (text, reasoning, finish) == (
        message.content,
        message.model_extra["reasoning_content"],
        whole.choices[0].finish_reason,
    )
    assert calls == []  # no tool_calls delta: the client must not run the MCP call
    assert without_ids(items) == without_ids(whole.model_extra["mcp_items"])
    assert usage.completion_tokens == whole.usage.completion_tokens
    assert usage.prompt_tokens == whole.usage.prompt_tokens


def test_a_call_of_the_requests_own_function_ends_it_for_the_client(server, scripted_path):
    own = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
    }
    choice = {"type": "function", "function": {"name": "get_weather"}}
    response = chat(server, scripted_path, tools=[NEVER, own], tool_choice=choice)
    (out,) = response.choices
    assert out.finish_reason == "tool_calls"
    assert [c.function.name for c in out.message.tool_calls] == ["get_weather"]
    assert [i["type"] for i in response.model_extra["mcp_items"]] == ["mcp_list_tools"]
    streamed = chat(server, scripted_path, tools=[NEVER, own], tool_choice=choice, stream=True)
    _, _, finish, _, _, calls = joined(streamed)
    assert finish == "tool_calls" and [c["name"] for c in calls] == ["get_weather"]


def test_a_server_that_fails_is_listed_with_its_error_and_the_model_still_answers(
    server, scripted_path
):
    broken = {**NEVER, "server_label": "broken"}
    response = chat(server, scripted_path, tools=[broken])
    (listed,) = response.model_extra["mcp_items"]
    assert listed["tools"] == [] and listed["error"]
    assert response.choices[0].finish_reason in ("stop", "length")


@pytest.mark.parametrize(
    "fields, param",
    [
        ({"tools": [{"type": "mcp", "server_label": "tools"}]}, "tools[0].require_approval"),
        (
            {"tools": [{**NEVER, "require_approval": {"never": {"tool_names": ["add"]}}}]},
            "tools[0].require_approval",
        ),
        ({"tools": [{**NEVER, "server_label": "elsewhere"}]}, "tools[0].server_label"),
        ({"tools": [NEVER, {**NEVER}]}, "tools[1].server_label"),
        ({"tools": [NEVER, {"type": "function", "function": {}}]}, "tools[1].function.name"),
        ({"tools": [{**NEVER, "headers": {"x": "y"}}]}, "tools[0].headers"),
        ({"tools": [{**NEVER, "surprise": 1}]}, "tools[0].surprise"),
        ({"tools": [NEVER], "tool_choice": "sometimes"}, "tool_choice"),
        ({"tools": [NEVER], "n": 2}, "n"),
        # the function tools' places are theirs in the body as sent
        (
            {"tools": [NEVER, {"type": "function", "function": {"name": ""}}]},
            "tools[1].function.name",
        ),
        ({"tools": [NEVER, FUNCTION, FUNCTION]}, "tools[2].name"),
        ({"tools": [NEVER], "response_format": {"type": "json_object"}}, "response_format"),
        ({"tools": [NEVER], "max_tokens": 10**9}, "max_tokens"),
        ({"tools": [NEVER], "max_tokens": 10**9, "stream": True}, "max_tokens"),
    ],
)
def test_bad_mcp_input_is_a_400_naming_it(server, scripted_path, fields, param):
    body = {"model": model_name(scripted_path), "messages": QUESTION, **fields}
    response = httpx.post(
        f"{server.url}/v1/chat/completions", json=body, headers=server.headers, timeout=60
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_an_output_constraint_applies_when_nothing_can_be_called(server, scripted_path):
    response = chat(
        server,
        scripted_path,
        tools=[NEVER, FUNCTION],
        tool_choice="none",
        response_format={"type": "json_object"},
    )
    assert response.choices[0].message.tool_calls is None
    assert [i["type"] for i in response.model_extra["mcp_items"]] == ["mcp_list_tools"]


def test_without_mcp_tools_nothing_changes(server, scripted_path):
    response = chat(server, scripted_path, max_tokens=8)
    assert "mcp_items" not in (response.model_extra or {})
    with pytest.raises(openai.BadRequestError) as caught:
        chat(server, scripted_path, tools=[{"type": "custom", "custom": {"name": "x"}}])
    assert caught.value.body["param"].startswith("tools[0]")


def test_a_failing_call_is_an_error_item_and_the_model_still_answers(server, scripted_path):
    worker = server.worker_pid()
    tool = {**NEVER, "allowed_tools": ["fail"]}
    response = chat(server, scripted_path, tools=[tool], tool_choice="required")
    call = response.model_extra["mcp_items"][1]
    assert (call["name"], call["output"], call["status"]) == ("fail", None, "failed")
    assert call["error"]["type"] == "mcp_tool_execution_error"
    assert response.choices[0].message.content == ANSWER
    assert server.worker_pid() == worker


def gone(server) -> bool:
    """Whether the gateway's MCP servers stop within 20 s ("hang" waits 30 s for a call)."""
    deadline = time.monotonic() + 20
    while running_under(server.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return running_under(server.proc.pid) == []


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads processes from /proc")
def test_a_client_leaving_mid_call_stops_the_mcp_server(server, scripted_path):
    hang = {**NEVER, "allowed_tools": ["hang"]}
    fields = {"tools": [hang], "tool_choice": "required", "max_tokens": 64}
    impatient = openai_client(server).with_options(timeout=4, max_retries=0)
    with pytest.raises(openai.APITimeoutError):
        impatient.chat.completions.create(
            model=model_name(scripted_path), messages=QUESTION, **fields
        )
    assert gone(server)
    body = {"model": model_name(scripted_path), "messages": QUESTION, "stream": True, **fields}
    url = f"{server.url}/v1/chat/completions"
    hung = False
    with httpx.stream("POST", url, json=body, headers=server.headers, timeout=30) as response:
        for line in response.iter_lines():
            if line.startswith(":"):  # a keepalive: the round ended and the call hangs
                hung = bool(running_under(server.proc.pid))
                break
    assert hung and gone(server)
    assert chat(server, scripted_path).choices[0].message.content == ANSWER
