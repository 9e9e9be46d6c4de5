"""The embedding pass planner (worker/embedding/batching.py): length buckets under a budget,
the oldest input always in the pass, and everything waiting embedded in bounded passes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from worker.embedding.batching import Pending, plan_pass


def pending(*lengths: int) -> list[Pending]:
    return [Pending(i, n) for i, n in enumerate(lengths)]


def test_nothing_waiting_plans_nothing():
    assert plan_pass([], 100, 10) == []


def test_inputs_of_similar_length_share_a_pass_and_long_ones_wait_for_their_own():
    # The oldest (key 0) is short: the short ones join it; the 60-token ones do not fit.
    chosen = plan_pass(pending(5, 60, 6, 60, 4), max_tokens=64, max_rows=8)
    assert sorted(p.key for p in chosen) == [0, 2, 4]


def test_the_oldest_input_is_in_the_pass_even_when_it_is_the_longest():
    chosen = plan_pass(pending(50, 3, 4, 5), max_tokens=64, max_rows=8)
    assert 0 in {p.key for p in chosen}
    assert len(chosen) * max(p.length for p in chosen) <= 64


def test_an_input_over_the_budget_runs_alone():
    assert [p.key for p in plan_pass(pending(500, 3), max_tokens=64, max_rows=8)] == [0]


def test_rows_are_capped():
    assert len(plan_pass(pending(*[1] * 20), max_tokens=1000, max_rows=8)) == 8


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 80), min_size=1, max_size=60),
    st.integers(16, 256),
    st.integers(1, 16),
)
def test_every_input_is_embedded_once_in_passes_within_the_budget(lengths, budget, rows):
    waiting = pending(*lengths)
    seen: list[int] = []
    passes = 0
    while waiting:
        chosen = plan_pass(waiting, budget, rows)
        assert chosen and waiting[0] in chosen  # progress, oldest first
        assert len(chosen) <= rows
        assert len(chosen) == 1 or len(chosen) * max(p.length for p in chosen) <= budget
        seen += [p.key for p in chosen]
        waiting = [p for p in waiting if p not in chosen]
        passes += 1
    assert sorted(seen) == list(range(len(lengths))) and passes <= len(lengths)
