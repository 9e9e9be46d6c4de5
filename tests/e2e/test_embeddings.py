"""`/v1/embeddings` through the real server (gateway + worker processes), by the openai SDK.

Vectors equal direct mlx-embeddings (an encoder, the checkpoint's mean pooling) and direct
mlx-lm (a Qwen3-Embedding-style decoder, last-token pooling) with cosine >= 0.9999 each; the
SDK's float and base64 answers are the same floats; concurrent requests all come back right;
errors are 4xx naming the problem and the worker survives them. The real all-MiniLM-L6-v2
(its pinned wheel) ranks the Paris document first for a question about France's capital.
"""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import openai
import pytest

from tests.support.minilm import minilm_path
from tests.support.server import SAME_BLAS, model_name, openai_client
from worker.tiny_models import ensure_checkpoint

TEXTS = [
    "What is the capital of France?",
    "Paris is the capital of France.",
    "def add(a, b): return a + b",
    "x",
    "import os, sys; print(sys.argv) " * 4,
]


@pytest.fixture(scope="module")
def bert_path() -> str:
    return str(ensure_checkpoint("bert", "tiny"))


@pytest.fixture(scope="module")
def embedder(start_server, bert_path):
    """The tiny BERT served alone, with a small input limit."""
    return start_server(bert_path, *SAME_BLAS, "--max-embedding-inputs", "16", name="bert")


@pytest.fixture(scope="module")
def chat_and_decoder(start_server, qwen3_path):
    decoder = str(ensure_checkpoint("qwen3_embedding"))
    server = start_server(qwen3_path, *SAME_BLAS, "--embedding-model", decoder, name="qwen3+emb")
    return server, decoder


def direct_bert(path: str, texts: list[str]) -> np.ndarray:
    from mlx_embeddings.utils import generate, load

    model, tokenizer = load(path)
    return np.array(generate(model, tokenizer, texts).text_embeds)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def as_array(response) -> np.ndarray:
    return np.array([d.embedding for d in sorted(response.data, key=lambda d: d.index)])


def test_sdk_vectors_equal_direct_mlx_embeddings_as_floats_and_as_base64(embedder, bert_path):
    client = openai_client(embedder)
    name = model_name(bert_path)
    floats = client.embeddings.create(model=name, input=TEXTS, encoding_format="float")
    default = client.embeddings.create(model=name, input=TEXTS)  # the SDK asks for base64
    raw = client.embeddings.create(model=name, input=TEXTS, encoding_format="base64")
    got = as_array(floats)
    assert cosines(got, direct_bert(bert_path, TEXTS)).min() >= 0.9999
    decoded = np.stack([np.frombuffer(base64.b64decode(d.embedding), "<f4") for d in raw.data])
    assert np.array_equal(decoded.astype(np.float64), got)
    assert np.array_equal(as_array(default), got)
    assert floats.usage.prompt_tokens > len(TEXTS) and floats.model == name


def test_text_embedding_3_small_reaches_the_embedder_and_a_token_input_works(embedder, bert_path):
    client = openai_client(embedder)
    from mlx_embeddings.utils import load

    _, tokenizer = load(bert_path)
    ids = tokenizer(TEXTS[0])["input_ids"]
    by_ids = client.embeddings.create(model="text-embedding-3-small", input=[ids])
    by_text = client.embeddings.create(model="text-embedding-3-small", input=TEXTS[0])
    assert cosines(as_array(by_ids), as_array(by_text)).min() >= 0.9999


def test_concurrent_requests_all_get_their_own_vectors(embedder, bert_path):
    client = openai_client(embedder)
    name = model_name(bert_path)
    alone = {t: as_array(client.embeddings.create(model=name, input=t))[0] for t in TEXTS}
    asks = [TEXTS[i % len(TEXTS) :] + TEXTS[: i % len(TEXTS)] for i in range(12)]
    with ThreadPoolExecutor(6) as pool:
        answers = list(
            pool.map(lambda texts: client.embeddings.create(model=name, input=texts), asks)
        )
    for texts, answer in zip(asks, answers, strict=True):
        expected = np.stack([alone[t] for t in texts])
        assert cosines(as_array(answer), expected).min() >= 0.9999


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"input": ""}, "input[0]"),
        ({"input": []}, "input"),
        ({"input": [1.5]}, "input[0]"),
        ({"input": {"text": "a"}}, "input"),
        ({"input": ["a", "word " * 300]}, "input[1]"),
        ({"input": ["a"] * 17}, "input"),
        ({"input": [[1, 10**6]]}, "input[0]"),
        ({"input": "a", "dimensions": 8}, "dimensions"),
        ({"input": "a", "encoding_format": "int8"}, "encoding_format"),
    ],
)
def test_bad_requests_are_400s_naming_the_problem_and_the_worker_stays(
    embedder, bert_path, body, named
):
    pid = embedder.worker_pid()
    response = httpx.post(
        f"{embedder.url}/v1/embeddings", headers=embedder.headers, timeout=60,
        json={"model": model_name(bert_path), **body},
    )  # fmt: skip
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == named
    assert embedder.worker_pid() == pid


def test_chat_on_an_embedding_only_server_is_a_400_naming_what_it_does(embedder, bert_path):
    client = openai_client(embedder)
    with pytest.raises(openai.BadRequestError, match="does not generate text"):
        client.chat.completions.create(
            model=model_name(bert_path), messages=[{"role": "user", "content": "hi"}]
        )


def test_a_decoder_embedder_next_to_chat_equals_direct_mlx_lm_last_token(
    chat_and_decoder, qwen3_path
):
    import mlx.core as mx
    from mlx_lm import load

    server, decoder = chat_and_decoder
    client = openai_client(server)
    got = as_array(client.embeddings.create(model=model_name(decoder), input=TEXTS))
    model, tokenizer = load(decoder)
    direct = []
    for text in TEXTS:
        state = np.array(model.model(mx.array([tokenizer.encode(text)]))[0, -1])
        direct.append(state / np.linalg.norm(state))
    assert cosines(got, np.stack(direct)).min() >= 0.9999
    # The chat model beside it still chats, and does not embed.
    reply = client.chat.completions.create(
        model=model_name(qwen3_path), messages=[{"role": "user", "content": "hi"}], max_tokens=3
    )
    assert reply.choices[0].message.content is not None
    with pytest.raises(openai.BadRequestError, match="does not make embeddings"):
        client.embeddings.create(model=model_name(qwen3_path), input="hi")
    ids = [(m.id, m.model_extra["capabilities"]) for m in client.models.list().data]
    # The embedder also reranks (by cosine: no reranker is served).
    assert ids == [
        (model_name(qwen3_path), ["chat", "complete"]),
        (model_name(decoder), ["embed", "rerank", "score"]),
    ]


@pytest.mark.real_weights
def test_real_minilm_ranks_the_paris_document_first(start_server):
    path = minilm_path()
    server = start_server(path, name="minilm")
    documents = [
        "Berlin is the capital and largest city of Germany.",
        "Paris is the capital of France.",
        "The mitochondria is the powerhouse of the cell.",
        "Python is a programming language.",
    ]
    client = openai_client(server)
    name = model_name(path)
    query = as_array(client.embeddings.create(model=name, input="What is France's capital city?"))
    docs = as_array(client.embeddings.create(model=name, input=documents))
    scores = docs @ query[0]
    assert int(np.argmax(scores)) == 1, scores
    assert cosines(docs, direct_bert(path, documents)).min() >= 0.9999
