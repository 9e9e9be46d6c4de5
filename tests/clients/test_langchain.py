"""LangChain's ChatOpenAI and ChatAnthropic: invoke, stream, bind_tools, with_structured_output;
OpenAIEmbeddings against the embedding model served next to the chat model."""

from __future__ import annotations

import pytest

from tests.support.clients import case_result, run_driver
from worker.tiny_models.scripted import ANSWER

pytestmark = pytest.mark.clients
PROVIDERS = ("openai", "anthropic")


@pytest.fixture(scope="module")
def results(python_clients, client_server, tmp_path_factory):
    home = tmp_path_factory.mktemp("langchain-home")
    return run_driver([python_clients.python, "run_langchain.py"], client_server, home)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_invoke(results, client_server, provider):
    result = case_result(results, f"{provider}-invoke", client_server)
    assert result["text"] == ANSWER
    assert result["usage"]["output_tokens"] > 0


@pytest.mark.parametrize("provider", PROVIDERS)
def test_stream(results, client_server, provider):
    result = case_result(results, f"{provider}-stream", client_server)
    assert result["text"] == ANSWER
    assert result["chunks"] > 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_bind_tools_forced_call_and_answer_from_its_result(results, client_server, provider):
    result = case_result(results, f"{provider}-bind_tools", client_server)
    [call] = result["tool_calls"]
    assert call["name"] == "get_weather"
    assert set(call["args"]) == {"city"}
    assert result["answer"] == ANSWER


@pytest.mark.parametrize("provider", PROVIDERS)
def test_with_structured_output(results, client_server, provider):
    result = case_result(results, f"{provider}-structured", client_server)
    assert result["type"] == "Person"
    assert set(result["value"]) == {"name", "age"}


def test_openai_embeddings_documents_and_query_equal_direct_mlx_embeddings(
    results, client_server, direct_embeddings
):
    import numpy as np

    result = case_result(results, "openai-embeddings", client_server)
    direct = direct_embeddings(result["texts"])
    documents = np.array(result["documents"])
    query = np.array(result["query"])
    assert documents.shape == direct.shape
    assert (documents * direct).sum(-1).min() >= 0.9999  # unit vectors: the cosine
    assert float(query @ direct[0]) >= 0.9999
