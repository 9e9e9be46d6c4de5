"""The OpenAI Agents SDK runs a function-tool loop on both of its OpenAI models.

The first model call is forced to use the tool (ModelSettings(tool_choice="required")); the
SDK's reset_tool_choice sets tool_choice back to auto for the next call, which answers from
the tool's result (a model that must call a tool on every turn would loop forever)."""

from __future__ import annotations

import pytest

from tests.support.clients import case_result, run_driver
from worker.tiny_models.scripted import ANSWER

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def results(python_clients, client_server, tmp_path_factory):
    home = tmp_path_factory.mktemp("agents-home")
    return run_driver(
        [python_clients.python, "run_agents.py"],
        client_server,
        home,
        OPENAI_AGENTS_DISABLE_TRACING="1",
    )


@pytest.mark.parametrize(
    "model",
    [
        pytest.param("chat_completions", id="OpenAIChatCompletionsModel"),
        pytest.param("responses", id="OpenAIResponsesModel"),
    ],
)
def test_function_tool_loop(results, client_server, model):
    result = case_result(results, model, client_server)
    assert result["final_output"] == ANSWER
    assert len(result["tool_calls"]) == 1  # the tool ran once, with whatever city came
    assert result["model_responses"] == 2  # the forced call, then the answer
    assert result["items"].count("tool_call_item") == 1
    assert result["items"][-1] == "message_output_item"
