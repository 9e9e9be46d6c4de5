"""`/v1/rerank` and `/v1/score` through the real server (gateway + worker processes).

A tiny cross-encoder's scores equal mlx-embeddings' encoder with the checkpoint's head, a tiny
LLM reranker's (served next to a chat model) equal mlx-lm's yes/no softmax under
Qwen3-Reranker's template, and an embedding model served alone reranks by the cosine of its
vectors and says so. Errors are 4xx naming the field and the worker survives them. The real
all-MiniLM-L6-v2 (its pinned wheel) ranks the Paris document first through the fallback.
"""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from tests.support.minilm import minilm_path
from tests.support.server import SAME_BLAS, model_name
from tests.unit.test_rerank_engine import direct_cross_encoder, direct_llm_reranker
from worker.tiny_models import ensure_checkpoint

QUERY = "What is the capital of France?"
DOCUMENTS = [
    "Berlin is the capital and largest city of Germany.",
    "Paris is the capital of France.",
    "The mitochondria is the powerhouse of the cell.",
    "Python is a programming language.",
]


@pytest.fixture(scope="module")
def cross_path() -> str:
    return str(ensure_checkpoint("bert_cross_encoder"))


@pytest.fixture(scope="module")
def cross_encoder(start_server, cross_path):
    return start_server(cross_path, *SAME_BLAS, "--max-embedding-inputs", "8", name="cross")


@pytest.fixture(scope="module")
def chat_and_reranker(start_server, qwen3_path):
    reranker = str(ensure_checkpoint("qwen3_reranker"))
    server = start_server(qwen3_path, *SAME_BLAS, "--rerank-model", reranker, name="qwen3+rr")
    return server, reranker


def post(server, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", headers=server.headers, json=body, timeout=60)


def test_cross_encoder_rerank_and_score_equal_the_direct_computation(cross_encoder, cross_path):
    name = model_name(cross_path)
    expected = direct_cross_encoder(cross_path, [(QUERY, d) for d in DOCUMENTS])
    reranked = post(
        cross_encoder, "/v1/rerank", {"model": name, "query": QUERY, "documents": DOCUMENTS}
    )
    assert reranked.status_code == 200, reranked.text
    body = reranked.json()
    assert [r["index"] for r in body["results"]] == list(np.argsort(-expected, kind="stable"))
    got = {r["index"]: r["relevance_score"] for r in body["results"]}
    assert np.allclose([got[i] for i in range(len(DOCUMENTS))], expected, atol=1e-5)
    assert body["results"][0]["document"]["text"] == DOCUMENTS[body["results"][0]["index"]]
    assert body["scoring_method"] == "cross-encoder" and body["usage"]["total_tokens"] > 0
    scored = post(cross_encoder, "/v1/score", {"model": name, "text_1": QUERY, "text_2": DOCUMENTS})
    assert scored.status_code == 200, scored.text
    assert np.allclose([d["score"] for d in scored.json()["data"]], expected, atol=1e-5)


@pytest.mark.parametrize(
    ("path", "body", "named"),
    [
        ("/v1/rerank", {"query": QUERY, "documents": []}, "documents"),
        ("/v1/rerank", {"query": QUERY, "documents": [3]}, "documents[0]"),
        ("/v1/rerank", {"query": QUERY, "documents": ["a"], "top_n": 0}, "top_n"),
        ("/v1/rerank", {"query": QUERY, "documents": ["a"] * 9}, "documents"),
        ("/v1/rerank", {"query": QUERY, "documents": ["a", "word " * 300]}, "documents[1]"),
        ("/v1/score", {"text_1": QUERY, "text_2": ["a", "word " * 300]}, "text_2[1]"),
    ],
)
def test_bad_requests_are_400s_naming_the_field_and_the_worker_stays(
    cross_encoder, cross_path, path, body, named
):
    pid = cross_encoder.worker_pid()
    response = post(cross_encoder, path, {"model": model_name(cross_path), **body})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == named
    assert cross_encoder.worker_pid() == pid


def test_an_llm_reranker_next_to_chat_equals_mlx_lm_yes_no_and_chat_does_not_rerank(
    chat_and_reranker, qwen3_path
):
    server, reranker = chat_and_reranker
    response = post(
        server,
        "/v1/score",
        {"model": model_name(reranker), "queries": QUERY, "documents": DOCUMENTS},
    )
    assert response.status_code == 200, response.text
    assert response.json()["scoring_method"] == "llm-yes-no"
    expected = direct_llm_reranker(reranker, QUERY, DOCUMENTS)
    assert np.allclose([d["score"] for d in response.json()["data"]], expected, atol=1e-4)
    refused = post(
        server, "/v1/rerank", {"model": model_name(qwen3_path), "query": "q", "documents": ["a"]}
    )
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "model"
    assert "does not rerank or score" in refused.json()["error"]["message"]


def test_an_embedding_model_alone_reranks_by_cosine_and_says_so(start_server):
    path = str(ensure_checkpoint("bert", "tiny"))
    server = start_server(path, *SAME_BLAS, name="bert-fallback")
    response = post(
        server, "/v1/rerank", {"model": model_name(path), "query": QUERY, "documents": DOCUMENTS}
    )
    assert response.status_code == 200, response.text
    assert response.json()["scoring_method"] == "embedding-cosine"
    vectors = httpx.post(
        f"{server.url}/v1/embeddings", headers=server.headers, timeout=60,
        json={"model": model_name(path), "input": [QUERY, *DOCUMENTS], "encoding_format": "float"},
    ).json()["data"]  # fmt: skip
    v = np.array([d["embedding"] for d in vectors])
    expected = v[1:] @ v[0] / np.linalg.norm(v[1:], axis=-1) / np.linalg.norm(v[0])
    got = {r["index"]: r["relevance_score"] for r in response.json()["results"]}
    assert np.allclose([got[i] for i in range(len(DOCUMENTS))], expected, atol=1e-5)


@pytest.mark.real_weights
def test_real_minilm_reranks_the_paris_document_first_through_the_fallback(start_server):
    path = minilm_path()
    server = start_server(path, name="minilm-rerank")
    response = post(
        server,
        "/v1/rerank",
        {"model": model_name(path), "query": QUERY, "documents": DOCUMENTS, "top_n": 2},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["scoring_method"] == "embedding-cosine"
    assert body["results"][0]["index"] == 1, body
    assert body["results"][0]["document"]["text"] == "Paris is the capital of France."
    assert len(body["results"]) == 2
