"""Speculative decoding in the batch engine is lossless: on the tiny checkpoints, every request
with prompt lookup (`ngram`) gives what it gives without speculation, token for token (greedy
and seeded), with the same logprobs, stop strings, limits, grammar and tool calls, alone and
eight at a time; what it leaves in the prefix cache is what decoding without it leaves; and at
temperature 1 the verified tokens follow the model's distribution.

Random-weight checkpoints repeat themselves, so prompt lookup proposes (and is accepted) often:
each test checks that it did.
"""

from __future__ import annotations

import math

import mlx.core as mx
import pytest

from protocol.inputs import ChatInputs, CompleteInputs, JsonSchema, SamplingParams
from protocol.messages import FinishReason, Submit
from worker.cache.prefix_cache import PrefixCache
from worker.runtime.stats import WorkerStats
from worker.text import features as request_features
from worker.text.batch_engine import BatchTextEngine
from worker.text.model import load_text_model
from worker.text.prefill_pacing import PrefillPacer
from worker.text.prefix_reuse import PrefixReuse
from worker.text.settings import GenerationSettings
from worker.text.speculation.config import Speculation
from worker.tiny_models import ensure_checkpoint

from .test_worker_batch_engine import (  # noqa: F401
    PROMPTS,
    Run,
    processor_calls,
    solo,
    submit,
    text_model,
)

NGRAM = Speculation("ngram", num_draft_tokens=4)


class VerifyAlways:
    """A batch gate that always lets the batch verify: these tests are about what verifying
    gives (the gate, which times steps, has tests of its own: test_speculation_batch_gate.py)."""

    def allows(self, size: int) -> bool:
        return True

    def ran(self, size: int, verified: bool, tokens: int) -> None:
        pass


@pytest.fixture(autouse=True)
def _verify_always(monkeypatch):
    from worker.text.speculation import speculator

    monkeypatch.setattr(speculator, "BatchGate", VerifyAlways)


def engine(text_model, speculation=NGRAM, prefix=None, pacer=None, step=2048, seqs=8):  # noqa: F811
    settings = GenerationSettings(prefill_step_size=step)
    return BatchTextEngine(
        text_model, settings, seqs, PrefixReuse(prefix), pacer, speculation=speculation
    )


def outputs(run: Run, name: str) -> tuple:
    """Everything a request returned that speculation must not change."""
    deltas = run.deltas[name]
    logprobs = [(e.token_id, round(e.logprob, 3)) for d in deltas for e in (d.logprobs or [])]
    terminal = run.terminal(name)
    return (
        run.tokens(name),
        run.text(name),
        terminal.finish_reason,
        terminal.stop_sequence,
        terminal.usage.completion_tokens,
        logprobs,
    )


def both(text_model, submits, **kw) -> tuple[Run, Run]:  # noqa: F811
    """The same requests run without and with speculation."""
    runs = []
    for speculation in (None, NGRAM):
        run = Run(engine(text_model, speculation, **kw))
        run.admit(*submits())
        run.until_done()
        runs.append(run)
    return runs[0], runs[1]


def drafts(run: Run) -> int:
    return run.engine._speculator.totals.drafts


def test_greedy_requests_alone_equal_mlx_lm_and_take_fewer_steps(text_model, solo):  # noqa: F811
    for name in ("fib", "cls", "xs"):
        run = Run(engine(text_model))
        run.admit(submit(name, PROMPTS[name], 40))
        run.until_done()
        assert (run.tokens(name), run.text(name)) == solo(PROMPTS[name], 40), name
        totals = run.engine._speculator.totals
        assert totals.accepted_tokens > 0, name
        assert run.steps < 40, name  # accepted proposals: more than a token per step


def mixed_submits() -> list:
    """Eight requests that exercise what speculation must keep: greedy, seeded sampling,
    logprobs, a stop string, a short limit, penalties."""
    return [
        submit("fib", PROMPTS["fib"], 30),
        submit("sea", PROMPTS["sea"], 24, temperature=0.9, seed=7),
        submit("os", PROMPTS["os"], 20, logprobs=2),
        submit("cls", PROMPTS["cls"], 28, stop=["pass"]),
        submit("hi", PROMPTS["hi"], 5),
        submit("xs", PROMPTS["xs"], 33, temperature=0.7, top_p=0.9, seed=1),
        submit("rep", PROMPTS["fib"], 25, repetition_penalty=1.3),
        submit("k", PROMPTS["cls"], 18, temperature=1.2, top_k=20, seed=3, logprobs=1),
    ]


def test_eight_mixed_requests_at_once_equal_their_runs_without_speculation(text_model):  # noqa: F811
    submits = mixed_submits
    plain, spec = both(text_model, submits)
    for s in submits():
        assert outputs(spec, s.request_id) == outputs(plain, s.request_id), s.request_id
    assert drafts(spec) > 0 and spec.steps < plain.steps


def test_a_request_joining_a_speculating_batch_and_paced_prefill_equal_their_solo_runs(
    text_model,  # noqa: F811
    solo,  # noqa: F811
):
    """The late prompt's chunks ride in the verification passes (the fused prefill)."""
    stats = WorkerStats("tiny")
    run = Run(engine(text_model, pacer=PrefillPacer(16, ratio=0.7), step=16))
    run.engine.bind_stats(stats)
    run.admit(submit("xs", PROMPTS["xs"], 60), submit("fib", PROMPTS["fib"], 60))
    while not (run.tokens("xs") and run.tokens("fib")):
        run.step()
    long_prompt = PROMPTS["sea"] * 3
    run.admit(submit("late", long_prompt, 12))
    run.until_done()
    assert run.tokens("xs") == solo(PROMPTS["xs"], 60)[0]
    assert run.tokens("fib") == solo(PROMPTS["fib"], 60)[0]
    assert run.tokens("late") == solo(long_prompt, 12)[0]
    snapshot = stats.snapshot()
    assert snapshot.prefill_tokens_in_decode_steps > 0
    assert snapshot.spec_decode_num_drafts > 0


def test_stop_strings_max_tokens_and_eos_end_exactly_where_they_end_without_it(text_model):  # noqa: F811
    eos = sorted(text_model.tokenizer.eos_token_ids)[0]

    def submits():
        return [
            submit("stop", PROMPTS["xs"], 40, stop=["x = 1\nx"]),
            submit("len", PROMPTS["cls"], 7),
            # logit_bias makes EOS likely mid-run, among accepted proposals
            submit("eos", PROMPTS["xs"], 40, logit_bias={eos: 4.0}),
        ]

    plain, spec = both(text_model, submits)
    for s in submits():
        assert outputs(spec, s.request_id) == outputs(plain, s.request_id), s.request_id
    assert plain.terminal("len").finish_reason == FinishReason.LENGTH
    assert drafts(spec) > 0


def test_a_grammar_masks_every_verified_position(text_model):  # noqa: F811
    schema = {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "integer"}}},
        "required": ["a"],
    }

    def submits():
        params = SamplingParams(max_tokens=40, temperature=0.0, constraint=JsonSchema(schema))
        return [
            Submit("json", CompleteInputs(PROMPTS["xs"], params), True),
            submit("free", PROMPTS["xs"], 30),
        ]

    plain, spec = both(text_model, submits)
    assert outputs(spec, "json") == outputs(plain, "json")
    assert outputs(spec, "free") == outputs(plain, "free")
    assert plain.text("json").startswith("{")
    assert drafts(spec) > 0


def test_stateful_processors_see_each_emitted_token_once_and_nothing_rejected(
    text_model,  # noqa: F811
    processor_calls,  # noqa: F811
):
    seen = processor_calls
    prompt = text_model.tokenizer.encode(PROMPTS["xs"])
    calls = []
    for speculation in (None, NGRAM):
        seen.clear()
        run = Run(engine(text_model, speculation))
        run.admit(submit("r", prompt, 24))
        run.until_done()
        calls.append(list(seen))
    generated = run.tokens("r")
    # Decoding calls them once per token fed: the prompt's last, then each generated one.
    assert calls[1] == calls[0] == [prompt + generated[:i] for i in range(25)]
    assert drafts(run) > 0


def test_a_tool_call_parses_the_same():
    scripted = load_text_model(str(ensure_checkpoint("qwen3_scripted")))
    request_features.configure(None, None, scripted.tokenizer, warm=False)
    think = scripted.tokenizer.convert_tokens_to_ids("<think>")
    tools = [
        {
            "type": "function",
            "function": {"name": "llm_time", "parameters": {"type": "object", "properties": {}}},
        }
    ]

    def submits():
        messages = [{"role": "user", "content": "What time is it? " * 3}]
        params = SamplingParams(max_tokens=60, temperature=0.0, logit_bias={think: -100})
        return [Submit("call", ChatInputs(messages, params, tools=tools), True)]

    def calls(run):  # the call ids are random
        return [(c.index, c.name, c.arguments) for d in run.deltas["call"] for c in d.tool_calls]

    plain, spec = both(scripted, submits)
    assert calls(plain) and calls(plain)[0][1] == "llm_time"
    assert outputs(spec, "call") == outputs(plain, "call")
    assert calls(spec) == calls(plain)
    assert spec.terminal("call").finish_reason == FinishReason.TOOL_CALLS
    assert drafts(spec) > 0


def test_the_prefix_cache_holds_what_decoding_without_speculation_leaves(text_model, solo):  # noqa: F811
    prompt = text_model.tokenizer.encode(PROMPTS["cls"])
    stored = {}
    for speculation in (None, NGRAM):
        cache = PrefixCache(1 << 30, "tiny")
        run = Run(engine(text_model, speculation, prefix=cache))
        run.admit(submit("r", prompt, 30, stop=["A:\n"]))
        run.until_done()
        tokens = prompt + run.tokens("r")
        found, remaining = cache.fetch(tokens + [0])
        hit = len(tokens) + 1 - len(remaining)
        stored[speculation is None] = (hit, found)
        # A follow-up reusing it equals a run without any cache.
        again = Run(engine(text_model, speculation, prefix=cache))
        again.admit(submit("again", tokens, 10))
        again.until_done()
        assert hit == len(tokens)  # the prompt and every token returned, nothing more
        assert again.terminal("again").usage.cached_tokens == len(tokens) - 1
        assert again.tokens("again") == solo(tokens, 10)[0]
    (hit_plain, plain), (hit_spec, spec) = stored[True], stored[False]
    assert hit_spec == hit_plain
    for a, b in zip(plain, spec, strict=True):
        assert a.offset == b.offset
        assert mx.allclose(a.keys[..., : a.offset, :], b.keys[..., : b.offset, :], atol=2e-4).item()


def test_counters_and_the_request_log_say_what_was_accepted(text_model, caplog):  # noqa: F811
    from worker.runtime.request_log import RequestLog

    stats = WorkerStats("tiny")
    run = Run(engine(text_model))
    run.engine.bind_stats(stats)
    log = RequestLog()
    s = submit("r", PROMPTS["xs"], 30)
    log.arrived(s)
    run.admit(s)
    while run.engine.active_ids():
        produced = run.step()
        assert len(produced) <= 1  # one delta per step: a step's tokens leave together
    snapshot = stats.snapshot()
    totals = run.engine._speculator.totals
    assert snapshot.spec_decode_num_drafts == totals.drafts > 0
    assert snapshot.spec_decode_num_draft_tokens == totals.draft_tokens
    assert snapshot.spec_decode_num_accepted_tokens == totals.accepted_tokens > 0
    per_pos = snapshot.spec_decode_num_accepted_tokens_per_pos
    assert per_pos[0] <= totals.drafts and sum(per_pos) == totals.accepted_tokens
    assert max(len(d.token_ids) for d in run.deltas["r"]) > 1
    with caplog.at_level("INFO", logger="worker.requests"):
        log.ended(run.terminal("r"))
    assert f"spec={totals.accepted_tokens}/{totals.draft_tokens} accepted" in caplog.text


def test_at_temperature_one_the_verified_token_follows_the_models_distribution(text_model):  # noqa: F811
    """Chi-square, over many seeds, of the token emitted at a verified position (the proposal
    when accepted, else the token drawn there) against the model's own probabilities there:
    the proposal is the most likely token, so both outcomes occur often."""
    from worker.text.sampling import make_request_sampler, resolve_sampling
    from worker.text.speculation.verify import Row, verify_rows

    prompt = text_model.tokenizer.encode(PROMPTS["sea"])
    logits = text_model.model(mx.array([prompt]))[0, -2:]  # positions 0 and 1 of a verification
    probs = mx.softmax(logits[0].astype(mx.float32)).tolist()
    proposal = max(range(len(probs)), key=probs.__getitem__)
    n = 2000
    rows = []
    for seed in range(n):
        params = SamplingParams(max_tokens=2, temperature=1.0, seed=seed)
        sampler = make_request_sampler(resolve_sampling(params, {}, len(probs)), len(probs))
        rows.append(Row(logits=logits, proposals=[proposal], sampler=sampler, processors=()))
    verdicts = verify_rows(rows)
    emitted = [proposal if v.accepted else v.next_token for v in verdicts]
    accepted = sum(v.accepted for v in verdicts)
    assert 0.5 * probs[proposal] * n < accepted < 1.5 * probs[proposal] * n
    # Pool the rare tokens so that every expected count is at least 5.
    common = [t for t, p in enumerate(probs) if p * n >= 5]
    observed = [emitted.count(t) for t in common]
    wanted = [probs[t] * n for t in common]
    observed.append(n - sum(observed))
    wanted.append(n - sum(wanted))
    chi2 = sum((o - e) ** 2 / e for o, e in zip(observed, wanted, strict=True) if e > 0)
    dof = len(observed) - 1
    # About p < 0.001: the chi-square's mean is dof, its sd sqrt(2 dof).
    assert chi2 < dof + 3.1 * math.sqrt(2 * dof), (chi2, dof)


@pytest.mark.parametrize("k", [0, 17])
def test_draft_token_counts_out_of_bounds_are_refused(k):
    from worker.text.speculation.config import SpeculationError, resolve

    with pytest.raises(SpeculationError, match="--num-draft-tokens must be between 1 and 16"):
        resolve("ngram", has_draft=False, batch_path_blocker=None, distributed=False,
                cache_problem=None, num_draft_tokens=k)  # fmt: skip


def test_a_lazy_grammar_switched_off_leaves_its_row_verified_with_the_others(
    text_model,  # noqa: F811
    monkeypatch,
):
    """A tool request (tool_choice auto, thinking off) carries the lazy grammar of bare calls
    (worker/text/constraints/bare_calls.py); once its answer opened otherwise the processor is
    inert, and its proposals are verified all at once, not position by position."""
    from worker.text.speculation import verify

    request_features.configure(None, None, text_model.tokenizer, warm=False)
    stepwise = []
    real = verify._stepwise
    monkeypatch.setattr(verify, "_stepwise", lambda row: stepwise.append(1) or real(row))
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]

    def submits():
        messages = [{"role": "user", "content": PROMPTS["xs"]}]
        params = SamplingParams(max_tokens=40, temperature=0.0)
        inputs = ChatInputs(
            messages, params, tools=tools, chat_template_kwargs={"enable_thinking": False}
        )
        return [Submit("tools", inputs, True)]

    plain, spec = both(text_model, submits)
    assert outputs(spec, "tools") == outputs(plain, "tools")
    assert drafts(spec) > 0
    assert len(stepwise) <= 1  # at most the step that saw the answer open
