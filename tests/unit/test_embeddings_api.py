"""`POST /v1/embeddings` over the real app and a scripted engine: OpenAI's request shapes, the
float and base64 answers, the limits and refusals that name their field, and which models
embed (gateway/embeddings/, gateway/api/embeddings/embeddings.py)."""

from __future__ import annotations

import base64
import struct

import pytest

from protocol.inputs import EmbedInputs
from protocol.messages import Delta, ErrorInfo, Usage
from protocol.ready import Capability, EmbeddingInfo
from tests.support.fake_engine import FakeEngine, accepted, make_client, ready

INFO = EmbeddingInfo("/models/tiny", "mlx-embeddings", "bert", 4, "mean", True, 16, 3, 100)
MATRYOSHKA = EmbeddingInfo(
    "/models/tiny", "mlx-embeddings", "bert", 4, "cls", False, 16, 3, 100, True, [2, 4]
)
VECTORS = [[0.5, -0.5, 0.5, -0.5], [1.0, 0.0, 0.0, 0.0]]


def vector_bytes(values: list[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def embedder(info: EmbeddingInfo = INFO, n: int = 1, chat: bool = False) -> FakeEngine:
    """An embedding model served alone (or, with `chat`, next to the chat model)."""
    done = Delta(
        "r", finish_reason="stop", usage=Usage(7, 0),
        embeddings=[vector_bytes(VECTORS[i % 2]) for i in range(n)],
    )  # fmt: skip
    engine = FakeEngine([accepted(), [done]])
    if chat:
        embed = EmbeddingInfo(**{**_fields(info), "model_path": "/models/minilm"})
        engine.ready_info = ready(Capability.CHAT, Capability.EMBED, embedding=embed)
    else:
        engine.ready_info = ready(Capability.EMBED, text=None, embedding=info)
    return engine


def _fields(info: EmbeddingInfo) -> dict:
    return {name: getattr(info, name) for name in info.__struct_fields__}


def post(engine: FakeEngine, body: dict):
    with make_client(engine) as client:
        return client.post("/v1/embeddings", json={"model": "tiny", **body})


def test_a_string_is_one_input_and_comes_back_as_floats_with_usage():
    engine = embedder()
    response = post(engine, {"input": "hello"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "list" and body["model"] == "tiny"
    assert body["data"] == [{"object": "embedding", "index": 0, "embedding": VECTORS[0]}]
    assert body["usage"] == {"prompt_tokens": 7, "total_tokens": 7}
    (sent,) = engine.requests
    assert sent.inputs == EmbedInputs(["hello"])


def test_base64_is_the_little_endian_float32_bytes_of_the_same_vectors():
    response = post(embedder(n=2), {"input": ["a", "b"], "encoding_format": "base64"})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    decoded = [list(struct.unpack("<4f", base64.b64decode(d["embedding"]))) for d in data]
    assert decoded == VECTORS and [d["index"] for d in data] == [0, 1]


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        (["a", "b"], ["a", "b"]),
        ([1, 2, 3], [[1, 2, 3]]),
        ([[1, 2], [3]], [[1, 2], [3]]),
        (["a", [5, 6]], ["a", [5, 6]]),
    ],
)
def test_every_input_shape_of_openai_reaches_the_worker_in_order(value, sent):
    engine = embedder(n=len(sent))
    response = post(engine, {"input": value})
    assert response.status_code == 200, response.text
    assert engine.requests[0].inputs.input == sent


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "input"),
        ({"input": None}, "input"),
        ({"input": []}, "input"),
        ({"input": ""}, "input[0]"),
        ({"input": ["a", ""]}, "input[1]"),
        ({"input": ["a", []]}, "input[1]"),
        ({"input": 5}, "input"),
        ({"input": {"text": "a"}}, "input"),
        ({"input": ["a", 3.5]}, "input[1]"),
        ({"input": [[1, -2]]}, "input[0]"),
        ({"input": [[1, True]]}, "input[0]"),
        ({"input": "a", "encoding_format": "int8"}, "encoding_format"),
        ({"input": "a", "dimensions": 0}, "dimensions"),
        ({"input": "a", "dimensions": "8"}, "dimensions"),
        ({"input": "a", "truncate_prompt_tokens": 0}, "truncate_prompt_tokens"),
        ({"input": "a", "truncate_prompt_tokens": -2}, "truncate_prompt_tokens"),
        ({"input": "a", "user": 5}, "user"),
        ({"input": "a", "model": 5}, "model"),
    ],
)
def test_a_malformed_field_is_a_400_naming_it(body, param):
    engine = embedder()
    response = post(engine, body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param
    assert engine.requests == []


def test_an_unknown_field_is_refused_by_name_and_user_is_accepted():
    assert post(embedder(), {"input": "a", "user": "u-1"}).status_code == 200
    response = post(embedder(), {"input": "a", "normalize": False})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unknown_parameter"
    assert response.json()["error"]["param"] == "normalize"


def test_more_inputs_than_the_limit_is_a_400_naming_the_limit():
    response = post(embedder(), {"input": ["a", "b", "c", "d"]})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "input" and "at most 3" in error["message"]
    assert "--max-embedding-inputs" in error["message"]


def test_a_token_input_longer_than_the_model_takes_is_a_400_naming_its_index():
    response = post(embedder(), {"input": [[1], list(range(17))]})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "input[1]" and "17 tokens" in error["message"]


def test_truncation_lets_a_long_token_input_through_to_the_worker():
    engine = embedder()
    response = post(engine, {"input": list(range(17)), "truncate_prompt_tokens": -1})
    assert response.status_code == 200, response.text
    assert engine.requests[0].inputs.truncate == -1


def test_dimensions_on_a_model_not_trained_for_them_is_a_400():
    response = post(embedder(), {"input": "a", "dimensions": 2})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "dimensions" and "Matryoshka" in error["message"]


def test_dimensions_equal_to_the_models_own_are_fine_everywhere():
    assert post(embedder(), {"input": "a", "dimensions": 4}).status_code == 200


def test_dimensions_of_a_matryoshka_model_reach_the_worker_and_others_are_refused():
    engine = embedder(MATRYOSHKA)
    assert post(engine, {"input": "a", "dimensions": 2}).status_code == 200
    assert engine.requests[0].inputs.dimensions == 2
    response = post(embedder(MATRYOSHKA), {"input": "a", "dimensions": 3})
    assert response.status_code == 400 and "takes 2, 4" in response.json()["error"]["message"]


def test_a_worker_refusal_is_a_400_whose_param_is_the_input_it_names():
    refused = Delta(
        "r", finish_reason="error", usage=Usage(0, 0),
        error=ErrorInfo("bad_request", "`input[2]` is 900 tokens long; this model takes at most 16"),
    )  # fmt: skip
    engine = embedder()
    engine.script = [[refused]]
    response = post(engine, {"input": ["a", "b", "c"]})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "input[2]"


def test_embeddings_from_a_chat_only_model_are_a_400_naming_what_it_does():
    engine = FakeEngine()
    response = post(engine, {"input": "a"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "model" and "does not make embeddings" in error["message"]
    assert "--embedding-model" in error["message"]


def test_chat_on_an_embedding_only_model_is_a_400_naming_what_it_does():
    with make_client(embedder()) as client:
        response = client.post(
            "/v1/chat/completions",
            json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}]},
        )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "model" and "does not generate text" in error["message"]
    assert "(it does: embed)" in error["message"]


def test_next_to_a_chat_model_the_embedder_is_its_own_model_with_openais_names():
    engine = embedder(chat=True)
    with make_client(engine) as client:
        cards = client.get("/v1/models").json()["data"]
        response = client.post(
            "/v1/embeddings", json={"model": "text-embedding-3-small", "input": "a"}
        )
    assert [(c["id"], c["capabilities"]) for c in cards] == [
        ("tiny", ["chat"]),
        ("minilm", ["embed"]),
    ]
    assert cards[1]["aliases"] == [
        "text-embedding-3-small", "text-embedding-3-large", "text-embedding-ada-002",
    ]  # fmt: skip
    assert cards[1]["max_model_len"] == INFO.max_input_tokens
    assert response.status_code == 200, response.text
    assert response.json()["model"] == "minilm"


def test_while_no_worker_is_ready_embeddings_are_a_503():
    engine = embedder()
    engine.state, engine.ready_info = "starting", None
    assert post(engine, {"input": "a"}).status_code == 503
