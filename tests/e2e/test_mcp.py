"""Remote MCP tools on the Responses API, through the real server and a real MCP server.

The model is the scripted tiny Qwen3 (worker/tiny_models/scripted.py): forced to call a tool
it calls `llm_time` (or the only tool it is offered), and after a tool result it thinks and
answers ANSWER. The MCP server is tests/support/mcp_server.py on the official `mcp` SDK,
started over stdio by the gateway as `--mcp-config` lists it.
"""

from __future__ import annotations

import time
from pathlib import Path

import openai
import pytest

from tests.support.mcp_server import TIME, running_under, start_gateway
from tests.support.server import model_name, openai_client
from worker.tiny_models import ensure_checkpoint
from worker.tiny_models.scripted import ANSWER, THINKING


@pytest.fixture(scope="module")
def scripted_path() -> str:
    return str(ensure_checkpoint("qwen3_scripted"))


@pytest.fixture(scope="module")
def server(start_server, tmp_path_factory):
    return start_gateway(start_server, tmp_path_factory, "mcp")


def respond(server, path, **fields):
    fields.setdefault("input", "What time is it?")
    fields.setdefault("max_output_tokens", 64)
    fields.setdefault("temperature", 0)
    return openai_client(server).responses.create(model=model_name(path), **fields)


def mcp(label="tools", **fields):
    return {"type": "mcp", "server_label": label, **fields}


def kinds(response) -> list[str]:
    return [item.type for item in response.output]


def only(response, kind: str):
    (item,) = [item for item in response.output if item.type == kind]
    return item


# A forced round thinks first (the call's grammar applies after the reasoning), then calls;
# the round after the tool's result thinks and answers.
CALLED = ["mcp_list_tools", "reasoning", "mcp_call", "reasoning", "message"]


def test_a_call_runs_on_the_mcp_server_and_its_result_reaches_the_model(server, scripted_path):
    tool = mcp(require_approval="never", allowed_tools=["llm_time", "add"])
    response = respond(server, scripted_path, tools=[tool], tool_choice="required")
    assert kinds(response) == CALLED
    listed, _, call, _, message = response.output
    assert [t.name for t in listed.tools] == ["llm_time", "add"] and listed.error is None
    assert listed.tools[1].input_schema["required"] == ["a", "b"]
    assert (call.server_label, call.name, call.output, call.error) == (
        "tools",
        "llm_time",
        TIME,
        None,
    )
    assert response.output[3].content[0].text == THINKING
    assert message.content[0].text == ANSWER
    assert response.status == "completed"
    # Two rounds: the second prompt holds the first and the tool's result.
    rounds = openai_client(server).responses.create(
        model=model_name(scripted_path),
        input="What time is it?",
        tools=[tool],
        max_output_tokens=1,
        temperature=0,
    )
    assert response.usage.input_tokens > 2 * rounds.usage.input_tokens


def test_an_mcp_tool_choice_forces_a_call_of_that_tool(server, scripted_path):
    tool = mcp(require_approval="never", allowed_tools=["llm_time", "add"])
    choice = {"type": "mcp", "server_label": "tools", "name": "llm_time"}
    response = respond(server, scripted_path, tools=[tool], tool_choice=choice)
    assert kinds(response) == CALLED and only(response, "mcp_call").name == "llm_time"
    assert response.tool_choice.type == "mcp"


def test_a_call_that_needs_approval_runs_once_approved(server, scripted_path):
    first = respond(server, scripted_path, tools=[mcp()], tool_choice="required")
    assert kinds(first) == ["mcp_list_tools", "reasoning", "mcp_approval_request"]
    request = first.output[2]
    assert (request.server_label, request.name) == ("tools", "llm_time")
    approved = respond(
        server,
        scripted_path,
        previous_response_id=first.id,
        input=[
            {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}
        ],
        tools=[mcp()],
    )
    assert kinds(approved) == ["mcp_list_tools", "mcp_call", "reasoning", "message"]
    call = only(approved, "mcp_call")
    assert (call.output, call.approval_request_id) == (TIME, request.id)
    assert only(approved, "message").content[0].text == ANSWER


def test_a_declined_call_is_not_run_and_the_model_answers(server, scripted_path):
    first = respond(server, scripted_path, tools=[mcp()], tool_choice="required")
    declined = respond(
        server,
        scripted_path,
        previous_response_id=first.id,
        input=[
            {
                "type": "mcp_approval_response",
                "approval_request_id": only(first, "mcp_approval_request").id,
                "approve": False,
            }
        ],
        tools=[mcp()],
    )
    assert kinds(declined) == ["mcp_list_tools", "reasoning", "message"]
    assert only(declined, "message").content[0].text == ANSWER


def test_streamed_the_mcp_items_come_as_their_events_between_the_rounds(server, scripted_path):
    tool = mcp(require_approval="never", allowed_tools=["llm_time"])
    whole = respond(server, scripted_path, tools=[tool], tool_choice="required")
    events = list(respond(server, scripted_path, tools=[tool], tool_choice="required", stream=True))
    names = [e.type for e in events]
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] == "response.completed"
    mcp_events = [n for n in names if ".mcp_" in n]
    assert mcp_events == [
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
    ]
    assert not [n for n in names if "function_call" in n]  # the MCP call is not a function call
    assert [e.sequence_number for e in events] == list(range(len(events)))
    done = [e.item for e in events if e.type == "response.output_item.done"]
    final = events[-1].response
    assert [item.type for item in done] == kinds(final) == kinds(whole) == CALLED
    assert only(final, "mcp_call").output == TIME
    texts = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert texts == only(final, "message").content[0].text == ANSWER
    assert final.usage.input_tokens == whole.usage.input_tokens
    # Stored like a non-streamed one: a follow-up continues its conversation.
    follow = respond(server, scripted_path, previous_response_id=final.id, input="And now?")
    fresh = respond(server, scripted_path, input="And now?")
    assert follow.usage.input_tokens > fresh.usage.input_tokens + 30


def test_streamed_an_approval_request_ends_the_response(server, scripted_path):
    events = list(
        respond(server, scripted_path, tools=[mcp()], tool_choice="required", stream=True)
    )
    final = events[-1].response
    assert kinds(final) == ["mcp_list_tools", "reasoning", "mcp_approval_request"]
    added = [e.item.type for e in events if e.type == "response.output_item.added"]
    assert added == kinds(final)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads processes from /proc")
def test_a_client_leaving_mid_call_stops_the_mcp_server_and_the_worker_goes_on(
    server, scripted_path
):
    # "tools" waits 30 s for a call: only the client leaving stops this one within 20.
    tool = mcp("tools", require_approval="never", allowed_tools=["hang"])
    fields = dict(tools=[tool], tool_choice="required", stream=True)
    with respond(server, scripted_path, **fields) as events:
        for event in events:
            if event.type == "response.mcp_call.in_progress":
                break
    assert running_under(server.proc.pid)  # the hung call's server was running
    deadline = time.monotonic() + 20
    while running_under(server.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert running_under(server.proc.pid) == []
    assert only(respond(server, scripted_path), "message").content[0].text


def error_text(error) -> str:
    if error.type == "mcp_tool_execution_error":
        return " ".join(part["text"] for part in error.content)
    return error.message


def test_a_replayed_conversation_does_not_run_an_approved_call_again(server, scripted_path):
    """store: false: the client sends the whole history again, approval and call included."""
    first = respond(server, scripted_path, tools=[mcp()], tool_choice="required", store=False)
    asked = only(first, "mcp_approval_request")
    approval = {"type": "mcp_approval_response", "approval_request_id": asked.id, "approve": True}
    question = {"role": "user", "content": "What time is it?"}
    history = [question, asked.model_dump(exclude_none=True), approval]
    second = respond(server, scripted_path, input=history, tools=[mcp()], store=False)
    call = only(second, "mcp_call")
    replay = [*history, call.model_dump(exclude_none=True), {"role": "user", "content": "Thanks"}]
    third = respond(server, scripted_path, input=replay, tools=[mcp()], store=False)
    assert "mcp_call" not in kinds(third)  # answered in the input: not run again
    # The same conversation with the call's result given once, as the chat template sees it.
    assert third.usage.input_tokens > second.usage.input_tokens


def test_an_approval_answered_twice_is_a_400(server, scripted_path):
    approval = {"type": "mcp_approval_response", "approval_request_id": "mcpr_x", "approve": True}
    with pytest.raises(openai.BadRequestError) as info:
        respond(server, scripted_path, input=[approval, approval], tools=[mcp()])
    assert info.value.body["param"] == "input[1].approval_request_id"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads processes from /proc")
def test_a_client_leaving_a_whole_response_mid_call_stops_the_mcp_server(server, scripted_path):
    tool = mcp("tools", require_approval="never", allowed_tools=["hang"])
    impatient = openai_client(server).with_options(timeout=4, max_retries=0)
    with pytest.raises(openai.APITimeoutError):
        impatient.responses.create(
            model=model_name(scripted_path),
            input="What time is it?",
            tools=[tool],
            tool_choice="required",
            max_output_tokens=64,
            temperature=0,
        )
    deadline = time.monotonic() + 20  # "tools" waits 30 s for a call
    while running_under(server.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert running_under(server.proc.pid) == []
    assert only(respond(server, scripted_path), "message").content[0].text


@pytest.mark.parametrize(
    "label, tool, kind, error",
    [
        ("tools", "fail", "mcp_tool_execution_error", "Error executing tool fail"),
        ("slow", "hang", "mcp_protocol_error", "timed out"),
        ("tools", "crash", "mcp_protocol_error", "Connection closed"),
    ],
)
def test_a_failing_call_is_an_error_item_and_the_response_goes_on(
    server, scripted_path, label, tool, kind, error
):
    worker = server.worker_pid()
    response = respond(
        server,
        scripted_path,
        tools=[mcp(label, require_approval="never", allowed_tools=[tool])],
        tool_choice="required",
    )
    assert kinds(response) == CALLED
    call = only(response, "mcp_call")
    assert call.name == tool and call.output is None
    assert call.error.type == kind and error in error_text(call.error)
    assert call.status == "failed"
    assert only(response, "message").content[0].text == ANSWER
    assert server.worker_pid() == worker


@pytest.mark.parametrize("label", ["broken", "web"])
def test_a_server_that_cannot_be_reached_lists_an_error(server, scripted_path, label):
    response = respond(server, scripted_path, tools=[mcp(label)])
    assert kinds(response)[0] == "mcp_list_tools"
    assert response.output[0].tools == [] and response.output[0].error
    assert only(response, "message").content[0].text == ANSWER


@pytest.mark.parametrize(
    "fields, param",
    [
        ({"tools": [mcp("elsewhere")]}, "tools[0].server_label"),
        ({"tools": [mcp(server_url="http://example.com/mcp")]}, "tools[0].server_url"),
        ({"tools": [mcp(connector_id="connector_gmail")]}, "tools[0].connector_id"),
        ({"tools": [mcp(defer_loading=True)]}, "tools[0].defer_loading"),
        ({"tools": [mcp(defer_loading="no")]}, "tools[0].defer_loading"),
        ({"tools": [mcp(require_approval="sometimes")]}, "tools[0].require_approval"),
        ({"tools": [mcp(allowed_tools="llm_time")]}, "tools[0].allowed_tools"),
        ({"tools": [mcp(), mcp()]}, "tools[1].server_label"),
        (
            {"tools": [mcp()], "tool_choice": {"type": "mcp", "server_label": "slow"}},
            "tool_choice.server_label",
        ),
        (
            {
                "tools": [mcp(), mcp("slow")],
                "tool_choice": {"type": "mcp", "server_label": "slow"},
            },
            "tool_choice.name",
        ),
        (
            {
                "tools": [mcp()],
                "input": [
                    {"type": "mcp_approval_response", "approval_request_id": "x", "approve": True}
                ],
            },
            "input[0].approval_request_id",
        ),
    ],
)
def test_bad_mcp_input_is_a_400_naming_it(server, scripted_path, fields, param):
    with pytest.raises(openai.BadRequestError) as info:
        respond(server, scripted_path, **fields)
    assert info.value.body["param"] == param, info.value.body
