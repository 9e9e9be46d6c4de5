"""`POST /v1/rerank` and `POST /v1/score` over the real app and a scripted engine: the Cohere /
Jina and vLLM request shapes, results sorted with their original indices, the refusals that
name their field, and which models score (gateway/api/embeddings/scoring.py, routes/rerank.py)."""

from __future__ import annotations

import pytest

from protocol.inputs import ScoreInputs
from protocol.messages import Delta, ErrorInfo, Usage
from protocol.ready import Capability, EmbeddingInfo, ScoreInfo
from tests.support.fake_engine import FakeEngine, accepted, make_client, ready

CROSS = ScoreInfo("/models/tiny", "cross-encoder", "bert", 64, 3, 1000)
EMBED = EmbeddingInfo("/models/minilm", "mlx-embeddings", "bert", 4, "mean", True, 16, 3, 100)
FALLBACK = ScoreInfo("/models/minilm", "embedding-cosine", "bert", 16, 3, 100)


def scorer(scores: list[float], info: ScoreInfo = CROSS) -> FakeEngine:
    """A reranker served alone, answering `scores`."""
    done = Delta("r", finish_reason="stop", usage=Usage(11, 0), scores=scores)
    engine = FakeEngine([accepted(), [done]])
    engine.ready_info = ready(Capability.RERANK, Capability.SCORE, text=None, score=info)
    return engine


def post(engine: FakeEngine, path: str, body: dict, model: str = "tiny"):
    with make_client(engine) as client:
        return client.post(path, json={"model": model, **body})


def test_rerank_sorts_by_score_keeping_the_original_indices_and_documents():
    engine = scorer([0.1, 0.9, 0.5])
    response = post(engine, "/v1/rerank", {"query": "q", "documents": ["a", {"text": "b"}, "c"]})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["results"] == [
        {"index": 1, "relevance_score": 0.9, "document": {"text": "b"}},
        {"index": 2, "relevance_score": 0.5, "document": {"text": "c"}},
        {"index": 0, "relevance_score": 0.1, "document": {"text": "a"}},
    ]
    assert body["model"] == "tiny" and body["id"].startswith("rerank-")
    assert body["usage"] == {"prompt_tokens": 11, "total_tokens": 11}
    assert body["scoring_method"] == "cross-encoder"
    (sent,) = engine.requests
    assert sent.inputs == ScoreInputs(["q"], ["a", "b", "c"])


def test_top_n_keeps_the_best_and_return_documents_false_leaves_them_out():
    body = post(
        scorer([0.1, 0.9, 0.5]), "/v1/rerank",
        {"query": "q", "documents": ["a", "b", "c"], "top_n": 2, "return_documents": False},
    ).json()  # fmt: skip
    assert body["results"] == [
        {"index": 1, "relevance_score": 0.9},
        {"index": 2, "relevance_score": 0.5},
    ]


def test_top_n_past_the_documents_returns_them_all_and_ties_keep_document_order():
    body = post(
        scorer([0.5, 0.5]), "/v1/rerank", {"query": "q", "documents": ["a", "b"], "top_n": 9}
    ).json()
    assert [r["index"] for r in body["results"]] == [0, 1]


@pytest.mark.parametrize("path", ["/v2/rerank", "/rerank"])
def test_rerank_answers_on_vllms_and_cohere_v2s_paths_too(path):
    assert post(scorer([0.2]), path, {"query": "q", "documents": ["a"]}).status_code == 200


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"documents": ["a"]}, "query"),
        ({"query": "", "documents": ["a"]}, "query"),
        ({"query": 5, "documents": ["a"]}, "query"),
        ({"query": "q"}, "documents"),
        ({"query": "q", "documents": []}, "documents"),
        ({"query": "q", "documents": "a"}, "documents"),
        ({"query": "q", "documents": ["a", 5]}, "documents[1]"),
        ({"query": "q", "documents": ["a", ""]}, "documents[1]"),
        ({"query": "q", "documents": [{"text": 5}]}, "documents[0].text"),
        ({"query": "q", "documents": [{"title": "t", "text": "a"}]}, "documents[0].title"),
        ({"query": "q", "documents": ["a"], "top_n": 0}, "top_n"),
        ({"query": "q", "documents": ["a"], "top_n": "2"}, "top_n"),
        ({"query": "q", "documents": ["a"], "return_documents": "yes"}, "return_documents"),
        ({"query": "q", "documents": ["a"], "truncate_prompt_tokens": 0}, "truncate_prompt_tokens"),
        ({"query": "q", "documents": ["a"], "rank_fields": ["text"]}, "rank_fields"),
        ({"query": "q", "documents": ["a", "b", "c", "d"]}, "documents"),
    ],
)
def test_a_malformed_rerank_field_is_a_400_naming_it(body, param):
    engine = scorer([0.0])
    response = post(engine, "/v1/rerank", body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param
    assert engine.requests == []


def test_more_documents_than_the_limit_names_the_flag():
    response = post(scorer([0.0]), "/v1/rerank", {"query": "q", "documents": ["a"] * 4})
    message = response.json()["error"]["message"]
    assert "at most 3" in message and "--max-embedding-inputs" in message


@pytest.mark.parametrize(
    ("body", "sent"),
    [
        ({"text_1": "q", "text_2": "a"}, (["q"], ["a"])),
        ({"text_1": "q", "text_2": ["a", "b"]}, (["q"], ["a", "b"])),
        ({"text_1": ["q", "r"], "text_2": ["a", "b"]}, (["q", "r"], ["a", "b"])),
        ({"queries": "q", "documents": ["a", "b"]}, (["q"], ["a", "b"])),
        ({"queries": ["q"], "items": ["a", "b"]}, (["q"], ["a", "b"])),
        ({"data_1": "q", "data_2": ["a", "b"]}, (["q"], ["a", "b"])),
    ],
)
def test_score_takes_vllms_shapes_and_answers_one_score_per_pair_in_order(body, sent):
    scores = [0.25, 0.75][: len(sent[1])]
    engine = scorer(scores)
    response = post(engine, "/v1/score", body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["object"] == "list" and answer["id"].startswith("score-")
    assert answer["data"] == [
        {"index": i, "object": "score", "score": s} for i, s in enumerate(scores)
    ]
    assert answer["usage"] == {"prompt_tokens": 11, "total_tokens": 11, "completion_tokens": 0}
    assert engine.requests[0].inputs == ScoreInputs(*sent)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "text_1"),
        ({"text_1": "q"}, "text_1"),
        ({"text_1": ["q", "r", "s"], "text_2": ["a", "b"]}, "text_2"),
        ({"text_1": "q", "text_2": []}, "text_2"),
        ({"text_1": "q", "text_2": ["a", 3]}, "text_2[1]"),
        ({"text_1": "", "text_2": "a"}, "text_1"),
        ({"text_1": "q", "text_2": "a", "queries": "q"}, "queries"),
        ({"text_1": "q", "text_2": "a", "use_activation": False}, "use_activation"),
    ],
)
def test_a_malformed_score_field_is_a_400_naming_it(body, param):
    engine = scorer([0.0])
    response = post(engine, "/v1/score", body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param
    assert engine.requests == []


def test_a_worker_refusal_names_the_field_the_request_used():
    refused = Delta(
        "r", finish_reason="error", usage=Usage(0, 0),
        error=ErrorInfo("bad_request", "`documents[1]` is 900 tokens long; this model takes at most 64"),
    )  # fmt: skip
    engine = scorer([0.0])
    engine.script = [[refused]]
    response = post(engine, "/v1/score", {"text_1": "q", "text_2": ["a", "b"]})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "text_2[1]" and error["message"].startswith("`text_2[1]` is 900")
    engine.script = [[refused]]
    response = post(engine, "/v1/rerank", {"query": "q", "documents": ["a", "b"]})
    assert response.json()["error"]["param"] == "documents[1]"


def test_rerank_on_a_chat_only_model_is_a_400_naming_what_would_serve_it():
    response = post(FakeEngine(), "/v1/rerank", {"query": "q", "documents": ["a"]})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "model" and "does not rerank or score" in error["message"]
    assert "--rerank-model" in error["message"] and "--embedding-model" in error["message"]


def test_an_embedding_model_next_to_chat_reranks_by_cosine_and_says_so():
    done = Delta("r", finish_reason="stop", usage=Usage(5, 0), scores=[0.3, 0.8])
    engine = FakeEngine([accepted(), [done]])
    engine.ready_info = ready(
        Capability.CHAT, Capability.EMBED, Capability.RERANK, Capability.SCORE,
        embedding=EMBED, score=FALLBACK,
    )  # fmt: skip
    with make_client(engine) as client:
        cards = client.get("/v1/models").json()["data"]
        response = client.post(
            "/v1/rerank", json={"model": "minilm", "query": "q", "documents": ["a", "b"]}
        )
        chat = client.post("/v1/rerank", json={"model": "tiny", "query": "q", "documents": ["a"]})
    assert [(c["id"], c["capabilities"]) for c in cards] == [
        ("tiny", ["chat"]),
        ("minilm", ["embed", "rerank", "score"]),
    ]
    assert response.status_code == 200, response.text
    assert response.json()["scoring_method"] == "embedding-cosine"
    assert [r["index"] for r in response.json()["results"]] == [1, 0]
    assert (
        chat.status_code == 400
        and "the model that does is `minilm`" in chat.json()["error"]["message"]
    )


def test_embeddings_from_a_reranker_are_a_400():
    response = post(scorer([0.0]), "/v1/embeddings", {"input": "a"})
    assert response.status_code == 400
    assert "does not make embeddings" in response.json()["error"]["message"]


def test_while_no_worker_is_ready_rerank_is_a_503():
    engine = scorer([0.0])
    engine.state, engine.ready_info = "starting", None
    assert post(engine, "/v1/rerank", {"query": "q", "documents": ["a"]}).status_code == 503
