"""LiteLLM (`openai/` and `anthropic/` providers): a plain, a streamed and a tool-using call;
`litellm.embedding` against the embedding model served next to the chat model."""

from __future__ import annotations

import json

import pytest

from tests.support.clients import case_result, run_driver
from worker.tiny_models.scripted import ANSWER

pytestmark = pytest.mark.clients
PROVIDERS = ("openai", "anthropic")


@pytest.fixture(scope="module")
def results(python_clients, client_server, tmp_path_factory):
    home = tmp_path_factory.mktemp("litellm-home")
    return run_driver(
        [python_clients.python, "run_litellm.py"],
        client_server,
        home,
        LITELLM_LOCAL_MODEL_COST_MAP="True",  # no fetch of the price list from GitHub
        LITELLM_TELEMETRY="False",
    )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_plain_call(results, client_server, provider):
    result = case_result(results, f"{provider}-plain", client_server)
    assert (result["text"], result["finish_reason"]) == (ANSWER, "stop")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_streamed_call(results, client_server, provider):
    result = case_result(results, f"{provider}-streamed", client_server)
    assert (result["text"], result["finish_reason"]) == (ANSWER, "stop")
    assert result["chunks"] > 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_forced_tool_call_and_answer_from_its_result(results, client_server, provider):
    result = case_result(results, f"{provider}-tool", client_server)
    assert result["finish_reason"] == "tool_calls"
    [call] = result["tool_calls"]
    assert call["name"] == "get_weather"
    assert set(json.loads(call["arguments"])) == {"city"}
    assert result["answer"] == ANSWER


def test_embedding_vectors_equal_direct_mlx_embeddings_in_order(
    results, client_server, direct_embeddings
):
    import numpy as np

    result = case_result(results, "openai-embedding", client_server)
    assert result["indices"] == [0, 1] and result["prompt_tokens"] > 0
    vectors = np.array(result["vectors"])
    assert (vectors * direct_embeddings(result["texts"])).sum(-1).min() >= 0.9999
