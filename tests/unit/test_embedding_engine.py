"""The embedding engine on real tiny checkpoints (worker/embedding/): vectors equal direct
mlx-embeddings / mlx-lm with the checkpoint's pooling, concurrent requests share padded passes
that stay under the budget, the refusals name the input, and chat keeps its decode steps."""

from __future__ import annotations

import numpy as np
import pytest

from protocol.inputs import EmbedInputs
from protocol.messages import FinishReason, Submit
from tests.support.scheduler_fakes import FakeEngine, Harness, by_id, submit
from worker.embedding.args import EmbeddingSettings
from worker.embedding.engine import EmbeddingEngine
from worker.embedding.models import load_embedding_model
from worker.tiny_models import ensure_checkpoint

TEXTS = [
    "What is the capital of France?",
    "Paris is the capital of France.",
    "def add(a, b): return a + b",
    "x",
    "import os, sys; print(sys.argv) " * 4,
]


@pytest.fixture(scope="module")
def bert():
    return load_embedding_model(str(ensure_checkpoint("bert", "tiny")))


@pytest.fixture(scope="module")
def bert_cls():
    return load_embedding_model(str(ensure_checkpoint("bert", "tiny_cls")))


@pytest.fixture(scope="module")
def decoder():
    return load_embedding_model(str(ensure_checkpoint("qwen3_embedding", "tiny")))


def run(engine: EmbeddingEngine, *requests: tuple[str, EmbedInputs]) -> dict:
    for request_id, inputs in requests:
        accepted = engine.admit(Submit(request_id, inputs, False))
        assert accepted.finish_reason is None, accepted.error
    ended = {}
    while engine.active_ids():
        for delta in engine.step():
            ended[delta.request_id] = delta
    return ended


def vectors(delta) -> np.ndarray:
    return np.stack([np.frombuffer(v, "<f4") for v in delta.embeddings])


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def test_mean_pooled_vectors_equal_mlx_embeddings_text_embeds(bert):
    from mlx_embeddings.utils import generate, load

    model, tokenizer = load(bert.checkpoint.path)
    direct = np.array(generate(model, tokenizer, TEXTS).text_embeds)
    delta = run(
        EmbeddingEngine(bert, EmbeddingSettings(batch_tokens=64)), ("r", EmbedInputs(TEXTS))
    )["r"]
    got = vectors(delta)
    assert cosines(got, direct).min() >= 0.9999
    assert np.allclose(np.linalg.norm(got, axis=-1), 1.0, atol=1e-5)
    assert delta.finish_reason == FinishReason.STOP
    assert delta.usage.prompt_tokens == sum(len(r) for r in tokenizer(TEXTS)["input_ids"])


def test_cls_pooling_without_normalize_equals_mlx_embeddings_first_token_state(bert_cls):
    import mlx.core as mx
    from mlx_embeddings.utils import load

    model, tokenizer = load(bert_cls.checkpoint.path)
    direct = []
    for text in TEXTS:  # unpadded, one at a time
        ids = mx.array([tokenizer(text)["input_ids"]])
        direct.append(np.array(model(ids).last_hidden_state[0, 0]))
    got = vectors(
        run(EmbeddingEngine(bert_cls, EmbeddingSettings()), ("r", EmbedInputs(TEXTS)))["r"]
    )
    assert cosines(got, np.stack(direct)).min() >= 0.9999
    assert np.allclose(got, np.stack(direct), atol=1e-4)  # not normalised: the raw state


def test_last_token_vectors_of_a_decoder_equal_mlx_lms_final_state(decoder):
    import mlx.core as mx
    from mlx_lm import load

    model, tokenizer = load(decoder.checkpoint.path)
    direct = []
    for text in TEXTS:
        ids = tokenizer.encode(text)
        assert ids[-1] == tokenizer.convert_tokens_to_ids("<|endoftext|>")
        state = np.array(model.model(mx.array([ids]))[0, -1])
        direct.append(state / np.linalg.norm(state))
    got = vectors(
        run(EmbeddingEngine(decoder, EmbeddingSettings()), ("r", EmbedInputs(TEXTS)))["r"]
    )
    assert cosines(got, np.stack(direct)).min() >= 0.9999


def test_concurrent_requests_share_passes_within_the_token_budget(bert):
    engine = EmbeddingEngine(bert, EmbeddingSettings(batch_tokens=256))
    seen: list[tuple[int, int]] = []
    embed = bert.embed
    bert.embed = lambda rows: (seen.append((len(rows), max(map(len, rows)))), embed(rows))[1]
    try:
        ended = run(
            engine, ("a", EmbedInputs(TEXTS[:3])), ("b", EmbedInputs(TEXTS[3:])),
            ("c", EmbedInputs([[5, 6, 7]])),
        )  # fmt: skip
    finally:
        bert.embed = embed
    assert sorted(ended) == ["a", "b", "c"]
    assert len(seen) < 6  # six inputs, fewer passes
    assert all(rows * width <= 256 for rows, width in seen)
    alone = run(EmbeddingEngine(bert, EmbeddingSettings()), ("z", EmbedInputs(TEXTS)))["z"]
    together = np.concatenate([vectors(ended["a"]), vectors(ended["b"])])
    assert cosines(together, vectors(alone)).min() >= 0.9999


def test_matryoshka_dimensions_cut_the_vector(bert_cls):
    full = vectors(
        run(EmbeddingEngine(bert_cls, EmbeddingSettings()), ("a", EmbedInputs(TEXTS[:2])))["a"]
    )
    cut = vectors(
        run(EmbeddingEngine(bert_cls, EmbeddingSettings()), ("b", EmbedInputs(TEXTS[:2], 16)))["b"]
    )
    assert cut.shape == (2, 16) and np.allclose(cut, full[:, :16], atol=1e-5)


def test_truncation_keeps_the_first_tokens_and_the_special_ones(bert):
    engine = EmbeddingEngine(bert, EmbeddingSettings())
    long_text = "word " * 400
    delta = run(engine, ("r", EmbedInputs([long_text], truncate=-1)))["r"]
    assert delta.usage.prompt_tokens == bert.checkpoint.max_input_tokens
    delta = run(engine, ("s", EmbedInputs([long_text, list(range(5, 50))], truncate=10)))["s"]
    assert delta.usage.prompt_tokens == 20


def test_a_12_mb_input_is_refused_before_tokenizing_and_truncated_ones_keep_their_tokens(bert):
    import time

    engine = EmbeddingEngine(bert, EmbeddingSettings())
    huge = "word " * 2_400_000
    started = time.perf_counter()
    delta = engine.admit(Submit("r", EmbedInputs(["ok", huge]), False))
    assert time.perf_counter() - started < 0.5
    assert delta.error is not None and "`input[1]` is at least" in delta.error.message
    truncated = run(engine, ("t", EmbedInputs([huge], truncate=-1)))["t"]
    whole = run(engine, ("w", EmbedInputs(["word " * 400], truncate=-1)))["w"]
    assert truncated.usage.prompt_tokens == bert.checkpoint.max_input_tokens
    assert np.array_equal(vectors(truncated), vectors(whole))


@pytest.mark.parametrize(
    ("inputs", "named"),
    [
        (EmbedInputs(["ok", "word " * 400]), "`input[1]` is"),
        (EmbedInputs(["ok", [1, 99999]]), "`input[1]` holds token id 99999"),
        (EmbedInputs([]), "`input` is empty"),
        (EmbedInputs(["a"] * 5), "at most 4 per request"),
        (EmbedInputs(["word " * 60] * 4), "at most 300 per request"),
        (EmbedInputs(["a"], dimensions=8), "`dimensions`"),
    ],
)
def test_bad_inputs_end_at_admission_with_a_400_naming_them(bert, inputs, named):
    engine = EmbeddingEngine(bert, EmbeddingSettings(max_inputs=4, max_total_tokens=300))
    delta = engine.admit(Submit("r", inputs, False))
    assert delta.finish_reason == FinishReason.ERROR and delta.error.code == "bad_request"
    assert named in delta.error.message
    assert engine.active_ids() == []


def test_an_abort_ends_the_request_and_drops_its_waiting_inputs(bert):
    engine = EmbeddingEngine(bert, EmbeddingSettings(batch_tokens=16))
    engine.admit(Submit("r", EmbedInputs(TEXTS), False))
    engine.step()
    (ended,) = engine.abort(["r", "unknown"])
    assert ended.finish_reason == FinishReason.ABORT and ended.usage is not None
    assert engine.active_ids() == [] and engine.step() == []


def test_chat_decodes_a_token_every_iteration_while_a_large_embedding_request_runs(bert):
    embedder = EmbeddingEngine(bert, EmbeddingSettings(batch_tokens=64))
    chat = FakeEngine()
    harness = Harness(engines=[chat, embedder])
    harness.put(Submit("e", EmbedInputs(TEXTS * 8), False), submit("c", max_tokens=5))
    harness.step()  # both admitted
    tokens, embedded_at = 0, None
    for iteration in range(200):
        deltas = by_id(harness.step())
        if "c" in deltas:
            tokens += len(deltas["c"].token_ids)
        if "e" in deltas and deltas["e"].finish_reason is not None:
            embedded_at = iteration
            break
    assert tokens == 5 and embedder.passes > 5  # chat finished while embedding went on
    assert embedded_at is not None and len(deltas["e"].embeddings) == len(TEXTS) * 8


def test_embedding_checkpoints_are_served_as_such_and_chat_checkpoints_are_not():
    from worker.runtime.loading import EMBED, TEXT, main_model_kind

    assert main_model_kind(str(ensure_checkpoint("bert", "tiny"))) == EMBED
    assert main_model_kind(str(ensure_checkpoint("qwen3_embedding"))) == EMBED
    assert main_model_kind(str(ensure_checkpoint("qwen3"))) == TEXT
