"""Reranking on real tiny checkpoints (worker/embedding/rerankers.py, engine.py): a cross-encoder's
(BERT, XLM-RoBERTa) scores equal mlx-embeddings' encoder with the checkpoint's head, an LLM reranker's equal
mlx-lm's yes/no softmax under Qwen3-Reranker's template, the embedding fallback's equal the
cosine of direct vectors; pairs of concurrent requests share padded passes, and the refusals
name the document."""

from __future__ import annotations

import glob
import json
from pathlib import Path

import numpy as np
import pytest

from protocol.inputs import EmbedInputs, ScoreInputs
from protocol.messages import FinishReason, Submit
from worker.embedding.args import EmbeddingSettings
from worker.embedding.engine import EmbeddingEngine, RerankEngine
from worker.embedding.models import load_embedding_model
from worker.embedding.rerankers import load_reranker
from worker.tiny_models import ensure_checkpoint

QUERY = "What is the capital of France?"
DOCUMENTS = [
    "Berlin is the capital and largest city of Germany.",
    "Paris is the capital of France.",
    "def add(a, b): return a + b",
    "x",
    "import os, sys; print(sys.argv) " * 4,
]


@pytest.fixture(scope="module")
def cross_encoder():
    return load_reranker(str(ensure_checkpoint("bert_cross_encoder")))


@pytest.fixture(scope="module")
def llm_reranker():
    return load_reranker(str(ensure_checkpoint("qwen3_reranker")))


@pytest.fixture(scope="module")
def bert():
    return load_embedding_model(str(ensure_checkpoint("bert", "tiny")))


def run(engine, *requests: tuple[str, object]) -> dict:
    for request_id, inputs in requests:
        accepted = engine.admit(Submit(request_id, inputs, False))
        assert accepted.finish_reason is None, accepted.error
    ended = {}
    while engine.active_ids():
        for delta in engine.step():
            ended[delta.request_id] = delta
    return ended


def direct_cross_encoder(path: str, pairs: list[tuple[str, str]]) -> np.ndarray:
    """mlx-embeddings' encoder on each pair alone (unpadded), then the checkpoint's head in
    numpy: BERT's pooler output and `classifier`, or RoBERTa's dense + tanh + out_proj on the
    first state."""
    import mlx.core as mx
    from mlx_embeddings.models import bert, xlm_roberta
    from transformers import AutoTokenizer

    config = json.loads((Path(path) / "config.json").read_text())
    family, prefix = (
        (bert, "bert.") if config["model_type"] == "bert" else (xlm_roberta, "roberta.")
    )
    model = family.Model(
        family.ModelArgs.from_dict({**config, "add_pooling_layer": prefix == "bert."})
    )
    weights = {}
    for file in glob.glob(f"{path}/model*.safetensors"):
        weights.update(mx.load(file))
    encoder = [(k[len(prefix) :], v) for k, v in weights.items() if k.startswith(prefix)]
    model.load_weights(encoder)
    model.eval()  # no dropout
    head = {k: np.array(v) for k, v in weights.items() if k.startswith("classifier.")}
    tokenizer = AutoTokenizer.from_pretrained(path)
    logits = []
    for query, document in pairs:
        encoded = tokenizer(query, document)
        types = encoded.get("token_type_ids") or [0] * len(encoded["input_ids"])
        out = model(mx.array([encoded["input_ids"]]), token_type_ids=mx.array([types]))
        if prefix == "bert.":
            pooled = np.array(out.pooler_output[0])
            logit = pooled @ head["classifier.weight"].T + head["classifier.bias"]
        else:
            first = np.array(out.last_hidden_state[0, 0])
            hidden = np.tanh(
                first @ head["classifier.dense.weight"].T + head["classifier.dense.bias"]
            )
            logit = hidden @ head["classifier.out_proj.weight"].T + head["classifier.out_proj.bias"]
        logits.append(float(logit[0]))
    logits = np.array(logits)
    if config.get("sbert_ce_default_activation_function", "").endswith("Identity"):
        return logits
    return 1 / (1 + np.exp(-logits))  # sentence-transformers' default for one label


def direct_llm_reranker(path: str, query: str, documents: list[str]) -> np.ndarray:
    """Qwen3-Reranker's model card recipe on mlx-lm: the template, the last token's logits,
    softmax over (no, yes)."""
    import mlx.core as mx
    from mlx_lm import load

    model, tokenizer = load(path)
    prefix = (
        "<|im_start|>system\nJudge whether the Document meets the requirements based on the "
        'Query and the Instruct provided. Note that the answer can only be "yes" or "no".'
        "<|im_end|>\n<|im_start|>user\n"
    )
    suffix = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    instruction = "Given a web search query, retrieve relevant passages that answer the query"
    yes, no = tokenizer.convert_tokens_to_ids("yes"), tokenizer.convert_tokens_to_ids("no")
    scores = []
    for document in documents:
        text = f"<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}"
        ids = tokenizer.encode(prefix + text + suffix, add_special_tokens=False)
        logits = np.array(model(mx.array([ids]))[0, -1].astype(mx.float32))
        pair = np.array([logits[no], logits[yes]])
        scores.append(np.exp(pair[1]) / np.exp(pair).sum())
    return np.array(scores)


@pytest.mark.parametrize(
    ("arch", "size"),
    [("bert_cross_encoder", "tiny"), ("bert_cross_encoder", "tiny_logit"),
     ("xlm_roberta_cross_encoder", "tiny")],
)  # fmt: skip
def test_cross_encoder_scores_equal_the_encoder_and_head_on_each_pair(arch, size):
    path = str(ensure_checkpoint(arch, size))
    model = load_reranker(path)
    assert model.checkpoint.activation == ("sigmoid" if size == "tiny" else "identity")
    engine = RerankEngine(model, EmbeddingSettings(batch_tokens=64))
    delta = run(engine, ("r", ScoreInputs([QUERY], DOCUMENTS)))["r"]
    assert delta.finish_reason == FinishReason.STOP
    expected = direct_cross_encoder(path, [(QUERY, d) for d in DOCUMENTS])
    assert np.allclose(delta.scores, expected, atol=1e-5), (delta.scores, expected)
    assert engine.passes > 1  # padded passes of several pairs each, under the budget


def test_llm_reranker_scores_equal_mlx_lm_yes_no_softmax_under_the_template(llm_reranker):
    engine = RerankEngine(llm_reranker, EmbeddingSettings())
    delta = run(engine, ("r", ScoreInputs([QUERY], DOCUMENTS)))["r"]
    expected = direct_llm_reranker(llm_reranker.checkpoint.path, QUERY, DOCUMENTS)
    assert np.allclose(delta.scores, expected, atol=1e-5), (delta.scores, expected)
    assert delta.usage.prompt_tokens > 100 * len(DOCUMENTS)  # the template counts


def test_pairs_of_concurrent_requests_share_passes_and_score_as_alone(cross_encoder):
    alone = run(
        RerankEngine(cross_encoder, EmbeddingSettings()), ("z", ScoreInputs([QUERY], DOCUMENTS))
    )
    engine = RerankEngine(cross_encoder, EmbeddingSettings(batch_tokens=512))
    ended = run(
        engine,
        ("a", ScoreInputs([QUERY], DOCUMENTS[:2])),
        ("b", ScoreInputs([QUERY], DOCUMENTS[2:])),
    )
    assert engine.passes == 1
    assert np.allclose(ended["a"].scores + ended["b"].scores, alone["z"].scores, atol=1e-6)


def test_n_queries_pair_with_n_documents_in_order(cross_encoder):
    queries = ["first question", "second question"]
    delta = run(
        RerankEngine(cross_encoder, EmbeddingSettings()), ("r", ScoreInputs(queries, DOCUMENTS[:2]))
    )["r"]
    expected = direct_cross_encoder(
        cross_encoder.checkpoint.path, list(zip(queries, DOCUMENTS[:2], strict=True))
    )
    assert np.allclose(delta.scores, expected, atol=1e-5)


def test_the_embedding_fallback_scores_by_the_cosine_of_the_vectors_in_shared_passes(bert):
    engine = EmbeddingEngine(bert, EmbeddingSettings(), scoring=True)
    ended = run(
        engine, ("s", ScoreInputs([QUERY], DOCUMENTS)), ("e", EmbedInputs([QUERY, *DOCUMENTS]))
    )
    assert engine.passes == 1  # the score request's texts and the embedding request's together
    vectors = np.stack([np.frombuffer(v, "<f4") for v in ended["e"].embeddings])
    expected = (
        vectors[1:] @ vectors[0] / np.linalg.norm(vectors[1:], axis=-1) / np.linalg.norm(vectors[0])
    )
    assert np.allclose(ended["s"].scores, expected, atol=1e-5)
    assert ended["s"].usage.prompt_tokens == ended["e"].usage.prompt_tokens  # the query once


def test_an_embedding_engine_scores_only_when_asked_to(bert):
    assert "score" not in EmbeddingEngine(bert, EmbeddingSettings()).ops
    fallback = EmbeddingEngine(bert, EmbeddingSettings(), scoring=True)
    assert "score" in fallback.ops and fallback.score_info().method == "embedding-cosine"


@pytest.mark.parametrize(
    ("inputs", "named"),
    [
        (ScoreInputs(["q"], []), "`documents` is empty"),
        (ScoreInputs(["q"], ["a"] * 5), "`documents` has 5 documents"),
        (ScoreInputs(["q", "r", "s"], ["a", "b"]), "`queries` has 3 texts"),
        (ScoreInputs(["q"], ["ok", "word " * 200]), "`documents[1]` is"),
        (ScoreInputs(["q"], ["word " * 60] * 4), "at most 300 per request"),
    ],
)
def test_bad_score_requests_end_at_admission_with_a_400_naming_them(
    cross_encoder, bert, inputs, named
):
    settings = EmbeddingSettings(max_inputs=4, max_total_tokens=300)
    for engine in (
        RerankEngine(cross_encoder, settings),
        EmbeddingEngine(bert, settings, scoring=True),
    ):
        delta = engine.admit(Submit("r", inputs, False))
        assert delta.finish_reason == FinishReason.ERROR and delta.error.code == "bad_request"
        assert named in delta.error.message, delta.error.message
        assert engine.active_ids() == []


def test_a_long_query_in_the_fallback_is_named_as_the_query(bert):
    engine = EmbeddingEngine(bert, EmbeddingSettings(), scoring=True)
    delta = engine.admit(Submit("r", ScoreInputs(["word " * 200], ["a"]), False))
    assert "`query` is" in delta.error.message


def test_truncation_cuts_each_pair_to_fit(cross_encoder, llm_reranker):
    long = "word " * 400
    for model, limit in ((cross_encoder, 20), (llm_reranker, 150)):
        engine = RerankEngine(model, EmbeddingSettings())
        delta = run(engine, ("r", ScoreInputs([QUERY], [long, "short"], truncate=limit)))["r"]
        assert len(delta.scores) == 2 and delta.usage.prompt_tokens <= 2 * limit
        everything = run(engine, ("s", ScoreInputs([QUERY], [long], truncate=-1)))["s"]
        assert everything.usage.prompt_tokens == model.checkpoint.max_input_tokens or (
            model is llm_reranker  # the decoder's limit is its 4096 positions: "word " * 400 fits
        )


def test_an_abort_drops_the_pairs_still_waiting(cross_encoder):
    engine = RerankEngine(cross_encoder, EmbeddingSettings(batch_tokens=32))
    engine.admit(Submit("r", ScoreInputs([QUERY], DOCUMENTS), False))
    engine.step()
    (ended,) = engine.abort(["r"])
    assert ended.finish_reason == FinishReason.ABORT
    assert engine.active_ids() == [] and engine.step() == []


def test_rerankers_are_served_as_such():
    from worker.runtime.loading import EMBED, RERANK, TEXT, main_model_kind

    assert main_model_kind(str(ensure_checkpoint("bert_cross_encoder"))) == RERANK
    assert main_model_kind(str(ensure_checkpoint("xlm_roberta_cross_encoder"))) == RERANK
    assert main_model_kind(str(ensure_checkpoint("qwen3_reranker"))) == RERANK
    assert main_model_kind(str(ensure_checkpoint("bert", "tiny"))) == EMBED
    assert main_model_kind(str(ensure_checkpoint("qwen3"))) == TEXT


def test_cross_encoder_activation_follows_sentence_transformers():
    from worker.embedding.checkpoint import CheckpointError, cross_encoder_activation

    assert cross_encoder_activation({}) == "sigmoid"
    assert (
        cross_encoder_activation(
            {"sentence_transformers": {"activation_fn": "torch.nn.modules.linear.Identity"}}
        )
        == "identity"
    )
    assert (
        cross_encoder_activation(
            {"sbert_ce_default_activation_function": "torch.nn.modules.activation.Sigmoid"}
        )
        == "sigmoid"
    )
    with pytest.raises(CheckpointError, match="Tanh"):
        cross_encoder_activation({"sentence_transformers": {"activation_fn": "torch.nn.Tanh"}})
