"""The batch-1 path (draft model, quantized KV cache, rotating KV cache) equals direct mlx-lm.

`stream_generate` with the same settings is the reference; the draft model is the tiny
checkpoint itself (it shares the tokenizer, which is all speculative decoding needs).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from mlx_lm.sample_utils import make_sampler

from protocol.inputs import CompleteInputs, SamplingParams
from protocol.messages import Delta, FinishReason, Submit
from tests.support.direct import stream_generate
from worker.cache.prefix_cache import PrefixCache
from worker.text.model import check_same_vocabulary, load_text_model
from worker.text.prefix_reuse import PrefixReuse
from worker.text.settings import GenerationSettings
from worker.text.solo_engine import SoloTextEngine
from worker.tiny_models import ensure_checkpoint

PROMPTS = ["def fib(n):", "Write a poem about the sea and the sky, " * 6, "import os\n"]
N = 20


@pytest.fixture(scope="module")
def path() -> str:
    return str(ensure_checkpoint("qwen3"))


@pytest.fixture(scope="module")
def text_model(path):
    return load_text_model(path)


@pytest.fixture(scope="module")
def with_draft(path):
    return load_text_model(path, draft_path=path)


def direct(text_model, prompt, **kwargs) -> list[int]:
    responses = stream_generate(
        text_model.model,
        text_model.tokenizer,
        prompt,
        max_tokens=N,
        sampler=make_sampler(0.0),
        **kwargs,
    )
    return [r.token for r in responses]


def run_all(engine: SoloTextEngine, prompts, max_tokens: int = N) -> dict[str, list[Delta]]:
    deltas: dict[str, list[Delta]] = {}
    for i, prompt in enumerate(prompts):
        params = SamplingParams(max_tokens=max_tokens, temperature=0.0)
        accepted = engine.admit(Submit(f"r{i}", CompleteInputs(prompt, params), True))
        assert accepted.finish_reason is None, accepted
        deltas[f"r{i}"] = [accepted]
    while engine.active_ids():
        for delta in engine.step():
            deltas[delta.request_id].append(delta)
    return deltas


def tokens(deltas: list[Delta]) -> list[int]:
    return [t for d in deltas for t in d.token_ids]


def test_speculative_decoding_equals_mlx_lm_with_the_same_draft(with_draft):
    settings = GenerationSettings(num_draft_tokens=3)
    deltas = run_all(SoloTextEngine(with_draft, settings), PROMPTS)
    for i, prompt in enumerate(PROMPTS):
        expected = direct(
            with_draft, prompt, draft_model=with_draft.draft_model, num_draft_tokens=3
        )
        assert tokens(deltas[f"r{i}"]) == expected


def test_a_quantized_kv_cache_equals_mlx_lm_with_the_same_settings(text_model):
    settings = GenerationSettings(kv_bits=8, kv_group_size=32, quantized_kv_start=0)
    deltas = run_all(SoloTextEngine(text_model, settings), PROMPTS)
    for i, prompt in enumerate(PROMPTS):
        expected = direct(text_model, prompt, kv_bits=8, kv_group_size=32, quantized_kv_start=0)
        assert tokens(deltas[f"r{i}"]) == expected


def test_a_rotating_kv_cache_equals_mlx_lm_with_the_same_size(text_model):
    deltas = run_all(SoloTextEngine(text_model, GenerationSettings(max_kv_size=24)), PROMPTS)
    for i, prompt in enumerate(PROMPTS):
        assert tokens(deltas[f"r{i}"]) == direct(text_model, prompt, max_kv_size=24)


def test_prefill_is_chunked_between_steps_and_an_abort_stops_it(text_model):
    engine = SoloTextEngine(text_model, GenerationSettings(prefill_step_size=8))
    long_prompt = text_model.tokenizer.encode(PROMPTS[1])
    deltas = {}
    for name, prompt in (("short", "hi"), ("long", long_prompt)):
        params = SamplingParams(max_tokens=50, temperature=0.0)
        deltas[name] = [engine.admit(Submit(name, CompleteInputs(prompt, params), True))]
    for _ in range(3):
        produced = {d.request_id: d for d in engine.step()}
        assert produced["short"].token_ids and "long" not in produced
    [aborted] = engine.abort(["long"])
    assert (aborted.finish_reason, aborted.usage.completion_tokens) == (FinishReason.ABORT, 0)
    assert engine.active_ids() == ["short"]


def test_a_repeated_prompt_with_a_draft_model_reuses_the_prefix_cache(with_draft):
    cache = PrefixReuse(PrefixCache(1 << 30, "tiny+draft"))
    engine = SoloTextEngine(with_draft, GenerationSettings(), cache)
    first = run_all(engine, [PROMPTS[1]])["r0"]
    again = run_all(engine, [PROMPTS[1]])["r0"]
    assert tokens(again) == tokens(first)
    prompt_len = len(with_draft.tokenizer.encode(PROMPTS[1]))
    assert again[-1].usage.cached_tokens == prompt_len - 1


def test_a_draft_model_with_another_vocabulary_is_refused(text_model):
    llama = load_text_model(str(ensure_checkpoint("llama")))
    with pytest.raises(ValueError, match="vocabulary"):
        check_same_vocabulary(text_model.tokenizer, llama.tokenizer, "llama")


def test_the_context_window_ends_a_speculative_request_with_length(with_draft):
    small = replace(with_draft, max_context=12)
    deltas = run_all(SoloTextEngine(small, GenerationSettings()), [[5, 6, 7, 8]], max_tokens=50)
    assert len(tokens(deltas["r0"])) == 8
    assert deltas["r0"][-1].finish_reason == FinishReason.LENGTH


def test_a_constrained_request_skips_the_draft_so_its_processors_see_each_token_once(
    with_draft, monkeypatch
):
    from worker.text import features as request_features

    seen: list[int] = []

    def counting(tokens, logits):
        seen.append(tokens.size)
        return logits

    monkeypatch.setattr(
        "worker.text.request.build_features",
        lambda *a: request_features.RequestFeatures(logits_processors=[counting]),
    )
    deltas = run_all(SoloTextEngine(with_draft, GenerationSettings()), [PROMPTS[0]])
    assert tokens(deltas["r0"]) == direct(with_draft, PROMPTS[0])
    # One call per sampled token (plus the one generate_step computes ahead), each with one
    # more token of context than the one before.
    assert N <= len(seen) <= N + 1
    assert seen == list(range(seen[0], seen[0] + len(seen)))
