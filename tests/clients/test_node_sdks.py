"""The `openai` and `@anthropic-ai/sdk` Node SDKs: a plain, a streamed and a tool-using call."""

from __future__ import annotations

import pytest

from tests.support.clients import case_result, run_driver
from worker.tiny_models.scripted import ANSWER

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def openai_results(node_clients, client_server, tmp_path_factory):
    home = tmp_path_factory.mktemp("node-openai-home")
    return run_driver([node_clients.node, "run_openai_sdk.mjs"], client_server, home)


@pytest.fixture(scope="module")
def anthropic_results(node_clients, client_server, tmp_path_factory):
    home = tmp_path_factory.mktemp("node-anthropic-home")
    return run_driver([node_clients.node, "run_anthropic_sdk.mjs"], client_server, home)


def test_openai_plain(openai_results, client_server):
    result = case_result(openai_results, "plain", client_server)
    assert (result["text"], result["finish_reason"]) == (ANSWER, "stop")


def test_openai_streamed(openai_results, client_server):
    result = case_result(openai_results, "streamed", client_server)
    assert (result["text"], result["finish_reason"]) == (ANSWER, "stop")
    assert result["chunks"] > 1
    assert result["usage"]["completion_tokens"] > 0


def test_openai_tool(openai_results, client_server):
    result = case_result(openai_results, "tool", client_server)
    assert result["finish_reason"] == "tool_calls"
    [call] = result["tool_calls"]
    assert (call["name"], set(call["arguments"])) == ("get_weather", {"city"})
    assert result["answer"] == ANSWER


def test_anthropic_plain(anthropic_results, client_server):
    result = case_result(anthropic_results, "plain", client_server)
    assert (result["text"], result["stop_reason"]) == (ANSWER, "end_turn")


def test_anthropic_streamed(anthropic_results, client_server):
    result = case_result(anthropic_results, "streamed", client_server)
    assert result["text"] == result["final_text"] == ANSWER
    assert result["stop_reason"] == "end_turn"
    assert result["usage"]["output_tokens"] > 0


def test_anthropic_tool(anthropic_results, client_server):
    result = case_result(anthropic_results, "tool", client_server)
    assert result["stop_reason"] == "tool_use"
    [call] = result["tool_calls"]
    assert (call["name"], set(call["arguments"])) == ("get_weather", {"city"})
    assert result["answer"] == ANSWER
