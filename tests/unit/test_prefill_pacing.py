"""The prefill pacer (worker/text/prefill_pacing.py) on made-up step times, and in the batch
engine on the tiny checkpoint: paced chunks next to a decoding stream, output equal to direct."""

from __future__ import annotations

import pytest

from worker.text.batch_engine import BatchTextEngine
from worker.text.prefill_pacing import FIRST_CHUNK, FLOOR_SLACK, PROBE_EVERY, PrefillPacer
from worker.text.prefix_reuse import PrefixReuse
from worker.text.settings import GenerationSettings

from .test_worker_batch_engine import PROMPTS, Run, solo, submit, text_model  # noqa: F401


def test_unpaced_alone_or_with_nothing_to_prefill_every_chunk_is_the_whole_step_size():
    off = PrefillPacer(2048, ratio=0)
    assert [off.chunk(d, p) for d, p in ((0, 1), (3, 1), (8, 2))] == [2048] * 3
    paced = PrefillPacer(512)
    assert paced.chunk(decoding=0, prefilling=2) == 512  # nothing decodes: full speed
    assert paced.chunk(decoding=4, prefilling=0) == 512  # nothing to prefill


def test_beside_decoding_it_measures_the_decode_step_then_steers_chunks_to_the_budget():
    pacer = PrefillPacer(2048, ratio=0.5)
    assert pacer.chunk(decoding=2, prefilling=1) == 0  # a decode-only step, to time it
    pacer.record(0.020, prompt_tokens=0)
    assert pacer.chunk(2, 1) == 1  # one token: what the floor costs
    pacer.record(0.020 + 0.002, prompt_tokens=1)  # 2 ms, under the budget (10 ms)
    assert pacer.chunk(2, 1) == FIRST_CHUNK
    pacer.record(0.020 + FIRST_CHUNK * 0.001, prompt_tokens=FIRST_CHUNK)  # its chunk: 16 ms
    assert pacer.chunk(2, 1) == 10  # scaled by the budget (0.5 x 20 ms) over 16 ms
    pacer.record(0.020 + 0.020, prompt_tokens=20)  # two prompts of 10 took 20 ms: halve
    assert pacer.chunk(2, 2) == 5
    pacer.record(0.020 + 0.001, prompt_tokens=10)  # far under the budget: at most double
    assert pacer.chunk(2, 2) == 10
    assert pacer.chunk(3, 1) == 0  # a third stream decodes: its step is timed again


def test_the_decode_step_is_timed_again_every_probe_every_paced_steps():
    pacer = PrefillPacer(2048, ratio=1.0)
    pacer.chunk(1, 1)
    pacer.record(0.01, 0)
    chunks = []
    for _ in range(PROBE_EVERY + 2):
        chunks.append(pacer.chunk(1, 1))
        pacer.record(0.01 + chunks[-1] * 0.0005, chunks[-1])
    assert 0 not in chunks[:PROBE_EVERY]
    assert chunks[0] == 1 and chunks[PROBE_EVERY:] == [0, 1]  # the decode step, then the floor


def test_a_chunk_is_at_least_one_token_and_at_most_the_step_size():
    slow = PrefillPacer(64, ratio=0.7)
    slow.chunk(1, 1)
    slow.record(0.01, 0)
    slow.chunk(1, 1)
    slow.record(0.01 + 0.001, 1)  # the floor: 1 ms, under the budget
    slow.chunk(1, 1)
    slow.record(0.01 + 16 * 0.05, 16)  # 50 ms a token: no whole token fits the budget
    assert slow.chunk(1, 1) == 1
    fast = PrefillPacer(64, ratio=0.7)
    fast.chunk(1, 1)
    fast.record(0.01, 0)
    fast.chunk(1, 1)
    fast.record(0.01 + 1e-6, 1)
    sizes = []
    for _ in range(6):
        sizes.append(fast.chunk(1, 1))
        fast.record(0.01 + sizes[-1] * 1e-6, sizes[-1])
    assert sizes == [16, 32, 64, 64, 64, 64]


@pytest.mark.parametrize("fixed_s", [0.0, 0.002, 0.010])
def test_steps_converge_to_the_budget_whatever_a_chunk_costs_on_top_of_its_tokens(fixed_s):
    """A step's time modelled as decode + (fixed + tokens x per-token): the paced steps settle
    at 1 + ratio times the decode step (less a token), never far above it."""
    decode_s, per_token_s, ratio = 0.025, 0.0004, 0.7
    pacer = PrefillPacer(4096, ratio)
    walls = []
    for _ in range(40):
        n = pacer.chunk(decoding=4, prefilling=1)
        wall = decode_s + (fixed_s + n * per_token_s if n else 0.0)
        pacer.record(wall, n)
        if n:
            walls.append(wall)
    settled = walls[-10:]
    assert max(settled) <= (1 + ratio) * decode_s * 1.02
    assert min(settled) >= (1 + ratio) * decode_s - 2 * per_token_s


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="max_chunk"):
        PrefillPacer(0)
    with pytest.raises(ValueError, match="ratio"):
        PrefillPacer(16, ratio=-1)


def test_a_paced_long_prefill_beside_a_decoding_stream_equals_direct(text_model, solo):  # noqa: F811
    settings = GenerationSettings(prefill_step_size=2048)
    pacer = PrefillPacer(settings.prefill_step_size, ratio=0.7)
    chunks: list[int] = []
    plan = pacer.chunk

    def recording(decoding: int, prefilling: int) -> int:
        chunks.append(plan(decoding, prefilling))
        return chunks[-1]

    pacer.chunk = recording  # type: ignore[method-assign]
    run = Run(BatchTextEngine(text_model, settings, 8, PrefixReuse(None), pacer))
    run.admit(submit("fast", PROMPTS["fib"], 80))
    for _ in range(3):
        run.step()
    long_prompt = text_model.tokenizer.encode(PROMPTS["xs"] * 3)
    run.admit(submit("long", long_prompt, 6))
    paced_from = len(chunks)
    while not any(d.request_id == "long" and d.token_ids for d in run.step()):
        pass
    paced = chunks[paced_from:]
    # A decode-only step times the decode step, one token the floor, then paced chunks.
    assert paced[:3] == [0, 1, FIRST_CHUNK]
    assert all(0 <= c <= 2048 for c in paced)
    run.until_done()
    assert run.tokens("long") == solo(long_prompt, 6)[0]
    assert run.tokens("fast") == solo(PROMPTS["fib"], 80)[0]


def paced_chunks(pacer: PrefillPacer, decode_s: float, chunk_s, steps: int) -> list[int]:
    """The chunks a pacer chooses beside one decoding stream when a step takes `decode_s`
    plus, with a chunk of n tokens, `chunk_s(n)`."""
    chunks = []
    for _ in range(steps):
        chunks.append(pacer.chunk(decoding=1, prefilling=1))
        pacer.record(decode_s + (chunk_s(chunks[-1]) if chunks[-1] else 0.0), chunks[-1])
    return chunks


def test_when_one_token_is_over_the_budget_chunks_take_floor_slack_times_one_tokens_cost():
    """The tiny checkpoints on a CPU at a long context: one prompt token (2.6 ms) costs more
    than the budget (0.7 x 3 ms); each further token 0.1 ms. The chunk shrinks to one token,
    measures it, then settles about where a chunk takes FLOOR_SLACK times that (3.25 ms: 7
    tokens)."""
    chunks = paced_chunks(PrefillPacer(2048, ratio=0.7), 0.003, lambda n: 0.0025 + 0.0001 * n, 40)
    assert chunks[:3] == [0, 1, FIRST_CHUNK]
    settled = chunks[-10:]
    assert set(settled) <= {6, 7, 8}
    assert all(0.0025 + 0.0001 * n <= FLOOR_SLACK * 0.0026 * 1.02 for n in settled)


def test_where_the_weights_dominate_chunks_grow_as_long_as_tokens_cost_little():
    """A weight-bound model (a real one, a GPU): a one-token prefill pass costs a decode step
    (20 ms), each further token 10 us. One token a step would take a 30K prompt 30K steps;
    the chunk grows instead, to where it takes FLOOR_SLACK times one token's pass."""
    chunks = paced_chunks(PrefillPacer(2048, ratio=0.7), 0.020, lambda n: 0.020 + 1e-5 * n, 60)
    assert chunks[:2] == [0, 1]
    assert 400 <= chunks[-1] <= 510  # 0.020 + 1e-5 n = 1.25 x 0.02001 at n = 501


def test_one_slow_floor_measurement_does_not_raise_the_budget():
    """The floor is the lesser of the last two one-token measurements: a floor step slowed by
    something else (50 ms instead of 8) leaves the budget where the earlier floor put it
    (1.25 x 8 ms: one or two tokens a step, not the six that 1.25 x 50 ms would allow)."""
    pacer = PrefillPacer(2048, ratio=0.7)
    chunks = paced_chunks(pacer, 0.010, lambda n: 0.008 * n, PROBE_EVERY + 2)
    assert chunks[:2] == [0, 1] and chunks[-1] == 0  # a decode probe again: the floor next
    assert pacer.chunk(1, 1) == 1
    pacer.record(0.010 + 0.050, 1)
    after = paced_chunks(pacer, 0.010, lambda n: 0.008 * n, 20)
    assert max(after) <= 2
