"""Continuous batching on the tiny checkpoint: every request in a batch equals its solo run.

The reference is `mlx_lm.stream_generate` (greedy) or a solo run through the same engine
(seeded sampling), called in this process.
"""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.generate import generate_step
from mlx_lm.sample_utils import make_sampler

from protocol.inputs import CompleteInputs, SamplingParams
from protocol.messages import Delta, ErrorCode, FinishReason, Submit
from tests.support.direct import stream_generate
from worker.cache.prefix_cache import PrefixCache
from worker.text import features as request_features
from worker.text.batch_engine import BatchTextEngine
from worker.text.model import load_text_model
from worker.text.prefill_pacing import PrefillPacer
from worker.text.prefix_reuse import PrefixReuse
from worker.text.settings import GenerationSettings
from worker.tiny_models import ensure_checkpoint

PROMPTS = {
    "fib": "def fib(n):",
    "sea": "Write a poem about the sea and the sky, " * 6,
    "os": "import os\n",
    "cls": "class A:\n    pass\n" * 12,
    "hi": "hello",
    "xs": "x = 1\n" * 40,
}


@pytest.fixture(scope="module")
def text_model():
    return load_text_model(str(ensure_checkpoint("qwen3")))


@pytest.fixture(scope="module")
def solo(text_model):
    """Greedy tokens and text of direct mlx-lm, memoized."""
    memo: dict = {}

    def run(prompt: str | list[int], max_tokens: int) -> tuple[list[int], str]:
        key = (prompt if isinstance(prompt, str) else tuple(prompt), max_tokens)
        if key not in memo:
            responses = list(
                stream_generate(
                    text_model.model,
                    text_model.tokenizer,
                    prompt,
                    max_tokens=max_tokens,
                    sampler=make_sampler(0.0),
                )
            )
            memo[key] = (
                [r.token for r in responses],
                "".join(r.text for r in responses),
            )
        return memo[key]

    return run


def engine_for(text_model, prefill_step_size=2048, max_num_seqs=8, prefix=None) -> BatchTextEngine:
    settings = GenerationSettings(prefill_step_size=prefill_step_size)
    return BatchTextEngine(text_model, settings, max_num_seqs, PrefixReuse(prefix))


def submit(request_id: str, prompt, max_tokens: int = 16, **sampling) -> Submit:
    sampling.setdefault("temperature", 0.0)
    params = SamplingParams(max_tokens=max_tokens, **sampling)
    return Submit(request_id, CompleteInputs(prompt, params), True)


class Run:
    """Drives an engine step by step, collecting every request's deltas."""

    def __init__(self, engine: BatchTextEngine) -> None:
        self.engine = engine
        self.deltas: dict[str, list[Delta]] = {}
        self.steps = 0

    def admit(self, *submits: Submit) -> None:
        for s in submits:
            delta = self.engine.admit(s)
            assert delta.finish_reason is None, delta
            self.deltas[s.request_id] = [delta]

    def step(self) -> list[Delta]:
        self.steps += 1
        produced = self.engine.step()
        for delta in produced:
            self.deltas[delta.request_id].append(delta)
        return produced

    def until_done(self, limit: int = 500) -> None:
        while self.engine.active_ids():
            self.step()
            assert self.steps < limit

    def tokens(self, request_id: str) -> list[int]:
        return [t for d in self.deltas[request_id] for t in d.token_ids]

    def text(self, request_id: str) -> str:
        return "".join(d.text for d in self.deltas[request_id])

    def terminal(self, request_id: str) -> Delta:
        ended = [d for d in self.deltas[request_id] if d.finish_reason is not None]
        assert len(ended) == 1, "exactly one terminal delta"
        return ended[0]


def test_a_batch_of_different_prompts_equals_each_solo_run(text_model, solo):
    run = Run(engine_for(text_model))
    run.admit(
        *(
            submit(name, prompt, max_tokens=12 + i)
            for i, (name, prompt) in enumerate(PROMPTS.items())
        )
    )
    run.until_done()
    for i, (name, prompt) in enumerate(PROMPTS.items()):
        assert (run.tokens(name), run.text(name)) == solo(prompt, 12 + i), name
        assert run.terminal(name).finish_reason == FinishReason.LENGTH


def test_requests_joining_mid_flight_equal_their_solo_runs(text_model, solo):
    run = Run(engine_for(text_model, prefill_step_size=16))
    run.admit(submit("fib", PROMPTS["fib"], 20), submit("sea", PROMPTS["sea"], 20))
    for _ in range(5):
        run.step()
    run.admit(submit("cls", PROMPTS["cls"], 20), submit("hi", PROMPTS["hi"], 20))
    run.until_done()
    for name in ("fib", "sea", "cls", "hi"):
        assert run.tokens(name) == solo(PROMPTS[name], 20)[0], name


def test_all_deltas_of_a_step_come_from_one_call_and_each_request_gets_one(text_model):
    run = Run(engine_for(text_model))
    run.admit(submit("a", PROMPTS["fib"], 5), submit("b", PROMPTS["os"], 5))
    run.step()  # prefill: each prompt but its last token fits one chunk
    run.step()  # the last prompt tokens go in; the first tokens are computed
    produced = run.step()
    assert sorted(d.request_id for d in produced) == ["a", "b"]
    assert all(len(d.token_ids) == 1 for d in produced)


def test_a_long_prefill_is_chunked_and_interleaved_with_decoding(text_model, solo):
    run = Run(engine_for(text_model, prefill_step_size=8))
    run.admit(submit("fast", PROMPTS["fib"], 60))
    run.step()
    run.step()
    long_prompt = text_model.tokenizer.encode(PROMPTS["xs"])
    chunks = -(-(len(long_prompt) - 1) // 8)
    run.admit(submit("long", long_prompt, 4))
    admitted_at, first_long_token_step = run.steps, None
    while first_long_token_step is None:
        produced = {d.request_id: d for d in run.step()}
        assert produced["fast"].token_ids, "the running stream gets a token every step"
        if "long" in produced:
            first_long_token_step = run.steps
    # One chunk of 8 per step, then a step for the last prompt token, then the first token.
    assert first_long_token_step - admitted_at == chunks + 2
    run.until_done()
    assert run.tokens("long") == solo(long_prompt, 4)[0]
    assert run.tokens("fast") == solo(PROMPTS["fib"], 60)[0]


def test_a_paced_prefill_rides_in_the_decode_steps_and_both_equal_their_solo_runs(text_model, solo):
    """With the pacer on, a prompt arriving beside decoding streams is fed in their decode
    steps' forward pass (worker/text/fused_generator.py); every output stays mlx-lm's."""
    settings = GenerationSettings(prefill_step_size=64)
    pacer = PrefillPacer(64, ratio=0.7)
    engine = BatchTextEngine(text_model, settings, 8, PrefixReuse(None), pacer)
    run = Run(engine)
    run.admit(submit("fast", PROMPTS["fib"], 90), submit("os", PROMPTS["os"], 70))
    run.step()
    run.step()
    long_prompt = text_model.tokenizer.encode(PROMPTS["cls"] + PROMPTS["xs"])
    run.admit(submit("long", long_prompt, 6))
    run.until_done()
    assert engine._generator.fused_tokens > 0  # chunks went into decode steps
    assert run.tokens("long") == solo(long_prompt, 6)[0]
    assert run.tokens("fast") == solo(PROMPTS["fib"], 90)[0]
    assert run.tokens("os") == solo(PROMPTS["os"], 70)[0]


def test_paced_prefills_with_a_cache_hit_an_abort_and_uneven_chunks_equal_their_solo_runs(
    text_model, solo
):
    """Two prompts prefilled together beside a stream, one onto a prefix-cache hit (their chunks
    are fused while of one width, and run as mlx-lm's own call at the uneven end), a third
    aborted mid-prefill: every output is mlx-lm's, and the worker counts the fused tokens."""
    from worker.runtime.stats import WorkerStats

    settings = GenerationSettings(prefill_step_size=64)
    prefix = PrefixReuse(PrefixCache(1 << 30, "tiny"))
    engine = BatchTextEngine(text_model, settings, 8, prefix, PrefillPacer(64, ratio=0.7))
    stats = WorkerStats(model="tiny")
    engine.bind_stats(stats)
    run = Run(engine)
    shared = text_model.tokenizer.encode(PROMPTS["cls"])
    run.admit(submit("warm", shared, 2))
    run.until_done()
    run.admit(submit("fast", PROMPTS["fib"], 120))
    run.step()
    run.step()
    hit = shared + text_model.tokenizer.encode(PROMPTS["xs"])
    other = text_model.tokenizer.encode(PROMPTS["sea"] + PROMPTS["xs"])
    gone = text_model.tokenizer.encode(PROMPTS["xs"] * 2)
    run.admit(submit("hit", hit, 5), submit("other", other, 5), submit("gone", gone, 5))
    for _ in range(3):
        run.step()
    [aborted] = run.engine.abort(["gone"])
    run.until_done()
    assert aborted.finish_reason == FinishReason.ABORT and not run.tokens("gone")
    assert run.terminal("hit").usage.cached_tokens > 0
    assert stats.snapshot().prefill_tokens_in_decode_steps > 0
    assert run.tokens("hit") == solo(hit, 5)[0]
    assert run.tokens("other") == solo(other, 5)[0]
    assert run.tokens("fast") == solo(PROMPTS["fib"], 120)[0]


def test_a_decode_step_that_skips_the_fused_call_fails_its_batch_and_turns_fusion_off(
    text_model, solo, monkeypatch
):
    """If mlx-lm's decode step ever stops calling the model once per step, a chunk cut for it
    would be lost: the batch fails loudly, and later requests run mlx-lm's two calls."""
    from mlx_lm.generate import GenerationBatch

    pacer = PrefillPacer(64, ratio=0.7)
    engine = BatchTextEngine(text_model, GenerationSettings(64), 8, PrefixReuse(None), pacer)
    run = Run(engine)
    run.admit(submit("fast", PROMPTS["fib"], 200))
    run.step()
    run.step()
    with monkeypatch.context() as patch:
        patch.setattr(GenerationBatch, "next", lambda self: [])  # never calls the model
        run.admit(submit("long", text_model.tokenizer.encode(PROMPTS["xs"]), 4))
        for _ in range(20):
            if not engine.active_ids():
                break
            run.step()
    assert not engine.active_ids()
    assert run.terminal("long").error.code == ErrorCode.INTERNAL
    assert not engine._generator.fuse
    run.admit(submit("after", PROMPTS["os"], 8))
    run.until_done()
    assert run.tokens("after") == solo(PROMPTS["os"], 8)[0]


def test_unpaced_the_generator_runs_mlx_lms_two_passes(text_model):
    assert not engine_for(text_model)._generator.fuse


def test_a_greedy_request_stays_greedy_next_to_a_hot_one(text_model, solo):
    run = Run(engine_for(text_model))
    run.admit(
        submit("hot", PROMPTS["sea"], 16, temperature=1.5, seed=3),
        submit("greedy", PROMPTS["fib"], 16),
    )
    run.until_done()
    assert run.tokens("greedy") == solo(PROMPTS["fib"], 16)[0]


def test_a_seeded_request_reproduces_its_solo_output_whatever_runs_beside_it(text_model):
    seeded = submit("seeded", PROMPTS["fib"], 16, temperature=1.0, top_k=0, seed=42)
    alone = Run(engine_for(text_model))
    alone.admit(seeded)
    alone.until_done()
    crowded = Run(engine_for(text_model))
    crowded.admit(
        submit("other", PROMPTS["sea"], 16, temperature=1.5),
        submit("greedy", PROMPTS["os"], 16),
    )
    crowded.step()
    crowded.admit(seeded)
    crowded.until_done()
    assert crowded.tokens("seeded") == alone.tokens("seeded")
    assert len(set(alone.tokens("seeded"))) > 1


def test_a_stop_string_ends_its_request_only_and_truncates_its_text(text_model, solo):
    _, text = solo(PROMPTS["sea"], 16)
    stop = text[len(text) // 2 : len(text) // 2 + 3]
    run = Run(engine_for(text_model))
    run.admit(
        submit("stopped", PROMPTS["sea"], 16, stop=[stop]), submit("other", PROMPTS["fib"], 16)
    )
    run.until_done()
    assert run.text("stopped") == text[: text.find(stop)]
    assert run.terminal("stopped").finish_reason == FinishReason.STOP
    assert run.tokens("other") == solo(PROMPTS["fib"], 16)[0]


def test_aborting_one_request_leaves_the_others_intact(text_model, solo):
    run = Run(engine_for(text_model))
    run.admit(*(submit(n, PROMPTS[n], 16) for n in ("fib", "sea", "os")))
    for _ in range(4):
        run.step()
    [aborted] = run.engine.abort(["sea", "unknown"])
    assert aborted.finish_reason == FinishReason.ABORT
    assert aborted.usage.completion_tokens == len(run.tokens("sea")) > 0
    run.until_done()
    assert run.tokens("fib") == solo(PROMPTS["fib"], 16)[0]
    assert run.tokens("os") == solo(PROMPTS["os"], 16)[0]


def test_an_abort_between_prefill_chunks_ends_the_request_before_any_token(text_model):
    run = Run(engine_for(text_model, prefill_step_size=8))
    run.admit(submit("long", PROMPTS["xs"], 4))
    run.step()
    [aborted] = run.engine.abort(["long"])
    assert (aborted.finish_reason, aborted.usage.completion_tokens) == (FinishReason.ABORT, 0)
    assert run.engine.active_ids() == [] and run.engine.step() == []


def test_eos_ends_with_stop_counts_as_a_token_and_adds_no_text(text_model):
    eos = text_model.tokenizer.eos_token_id
    run = Run(engine_for(text_model))
    run.admit(submit("eos", [5, 6, 7], 5, logit_bias={eos: 100.0}))
    run.until_done()
    assert (run.tokens("eos"), run.text("eos")) == ([eos], "")
    terminal = run.terminal("eos")
    assert (terminal.finish_reason, terminal.usage.completion_tokens) == (FinishReason.STOP, 1)


def test_logprobs_equal_mlx_lm_and_list_the_top_alternatives(text_model):
    prompt = text_model.tokenizer.encode(PROMPTS["fib"])
    reference = list(
        generate_step(mx.array(prompt), text_model.model, max_tokens=6, sampler=make_sampler(0.0))
    )
    run = Run(engine_for(text_model))
    run.admit(submit("lp", prompt, 6, logprobs=3), submit("plain", PROMPTS["os"], 6))
    run.until_done()
    entries = [e for d in run.deltas["lp"] for e in (d.logprobs or [])]
    assert [e.token_id for e in entries] == [t for t, _ in reference]
    for entry, (token, logprobs) in zip(entries, reference, strict=True):
        assert entry.logprob == pytest.approx(logprobs[token].item(), abs=1e-4)
        assert entry.token == text_model.tokenizer.decode([token])
        assert len(entry.top) == 3 and entry.top[0][0] == token
        assert [t[2] for t in entry.top] == sorted((t[2] for t in entry.top), reverse=True)
    assert all(d.logprobs is None for d in run.deltas["plain"])


@pytest.mark.parametrize("k", [21, -1, True])
def test_logprobs_outside_0_to_20_are_a_bad_request(text_model, k):
    delta = engine_for(text_model).admit(submit("r", "hi", 4, logprobs=k))
    assert delta.error.code == ErrorCode.BAD_REQUEST and "logprobs" in delta.error.message


def test_a_failing_logits_processor_fails_only_its_request(text_model, solo, monkeypatch):
    def features(tokenizer, inputs, prompt):
        if inputs.prompt == "x":

            def explode(tokens, logits):
                raise ValueError("constraint broke")

            return request_features.RequestFeatures(logits_processors=[explode])
        return request_features.RequestFeatures()

    monkeypatch.setattr("worker.text.request.build_features", features)
    run = Run(engine_for(text_model))
    run.admit(submit("bad", "x", 8), submit("good", PROMPTS["fib"], 8))
    run.until_done()
    terminal = run.terminal("bad")
    assert terminal.error.code == ErrorCode.INTERNAL
    assert terminal.error.message == "the worker failed this request (ValueError)"
    assert run.tokens("good") == solo(PROMPTS["fib"], 8)[0]


def test_the_output_parser_gets_the_text_and_may_change_the_finish_reason(text_model, monkeypatch):
    class Upper(request_features.OutputParser):
        def feed(self, text):
            return request_features.ParsedDelta(reasoning=text)

        def finish(self, finish_reason):
            return request_features.ParsedDelta(content="!"), "tool_calls"

    monkeypatch.setattr(
        "worker.text.request.build_features",
        lambda *a: request_features.RequestFeatures(parser=Upper()),
    )
    run = Run(engine_for(text_model))
    run.admit(submit("p", PROMPTS["fib"], 6))
    run.until_done()
    terminal = run.terminal("p")
    assert run.text("p") == "!" and "".join(d.reasoning for d in run.deltas["p"])
    assert terminal.finish_reason == FinishReason.TOOL_CALLS
    assert terminal.usage.reasoning_tokens > 0


def test_a_repeated_prompt_reuses_the_prefix_cache_and_gives_the_same_tokens(text_model, solo):
    cache = PrefixCache(1 << 30, "tiny")
    prompt = text_model.tokenizer.encode(PROMPTS["sea"])
    for round_ in range(2):
        run = Run(engine_for(text_model, prefix=cache))
        run.admit(submit("r", prompt, 10))
        run.until_done()
        assert run.tokens("r") == solo(PROMPTS["sea"], 10)[0]
        assert run.terminal("r").usage.cached_tokens == (0 if round_ == 0 else len(prompt) - 1)


def test_prefix_cache_lookups_are_counted_in_tokens_as_vllm_counts_them(text_model):
    from worker.runtime.stats import WorkerStats

    stats = WorkerStats(model="tiny")
    engine = engine_for(text_model, prefix=PrefixCache(1 << 30, "tiny"))
    engine.bind_stats(stats)
    prompt = text_model.tokenizer.encode(PROMPTS["sea"])
    for request_id in ("cold", "warm"):
        run = Run(engine)
        run.admit(submit(request_id, prompt, 4))
        run.until_done()
    snapshot = stats.snapshot()
    assert snapshot.prefix_cache_queries == 2 * len(prompt)  # every prompt token, twice
    assert snapshot.prefix_cache_hits == run.terminal("warm").usage.cached_tokens > 0


def test_no_prefix_cache_counts_no_lookups(text_model):
    from worker.runtime.stats import WorkerStats

    stats = WorkerStats(model="tiny")
    engine = engine_for(text_model)
    engine.bind_stats(stats)
    run = Run(engine)
    run.admit(submit("r", text_model.tokenizer.encode(PROMPTS["sea"]), 2))
    run.until_done()
    assert stats.snapshot().prefix_cache_queries == 0


def test_an_aborted_request_leaves_its_cache_for_the_next_one(text_model, solo):
    cache = PrefixCache(1 << 30, "tiny")
    prompt = text_model.tokenizer.encode(PROMPTS["cls"])
    run = Run(engine_for(text_model, prefix=cache))
    run.admit(submit("first", prompt, 50))
    for _ in range(4):
        run.step()
    run.engine.abort(["first"])
    run.admit(submit("again", prompt, 10))
    run.until_done()
    assert run.terminal("again").usage.cached_tokens == len(prompt) - 1
    assert run.tokens("again") == solo(PROMPTS["cls"], 10)[0]


def test_cached_and_uncached_prompts_prefilled_together_equal_their_solo_runs(text_model, solo):
    cache = PrefixCache(1 << 30, "tiny")
    head = text_model.tokenizer.encode(PROMPTS["sea"])
    warm = Run(engine_for(text_model, prefix=cache))
    warm.admit(submit("warm", head, 2))
    warm.until_done()
    longer = head + text_model.tokenizer.encode(PROMPTS["cls"])
    run = Run(engine_for(text_model, prefill_step_size=16, prefix=cache))
    run.admit(
        submit("same", head, 12), submit("longer", longer, 12), submit("new", PROMPTS["xs"], 12)
    )
    run.until_done()
    assert run.terminal("same").usage.cached_tokens == len(head) - 1
    assert run.terminal("longer").usage.cached_tokens >= len(head)
    assert run.terminal("new").usage.cached_tokens == 0
    assert run.tokens("same") == solo(head, 12)[0]
    assert run.tokens("longer") == solo(longer, 12)[0]
    assert run.tokens("new") == solo(PROMPTS["xs"], 12)[0]


@pytest.fixture
def processor_calls(monkeypatch) -> list[list[int]]:
    """Every request gets a logits processor that records the tokens of each call here."""
    seen: list[list[int]] = []

    def recording(tokens, logits):
        seen.append(tokens.tolist())
        return logits

    monkeypatch.setattr(
        "worker.text.request.build_features",
        lambda *a: request_features.RequestFeatures(logits_processors=[recording]),
    )
    return seen


def test_processors_see_the_whole_prompt_then_each_token_also_after_a_cache_hit(
    text_model, processor_calls
):
    seen = processor_calls
    cache = PrefixCache(1 << 30, "tiny")
    prompt = text_model.tokenizer.encode(PROMPTS["sea"])
    for request_id in ("cold", "warm"):
        seen.clear()
        run = Run(engine_for(text_model, prefill_step_size=16, prefix=cache))
        run.admit(submit(request_id, prompt, 6))
        run.until_done()
        generated = run.tokens(request_id)
        assert seen[0] == prompt
        assert seen[1:6] == [prompt + generated[:i] for i in range(1, 6)]
