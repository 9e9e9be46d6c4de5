"""The scheduler's invariants under random submit / abort / expire / finish sequences.

Several fake engines (no MLX) serve different ops, their steps taking random times (so the
scheduler's time sharing makes some wait their turn); hypothesis drives random interleavings of
submits, aborts (of active, waiting, finished and unknown ids), clock jumps past deadlines and
iterations, and sometimes a shutdown at the end. Whatever the sequence: an iteration never raises, at most one Step goes out per
iteration, every request's first delta is its accepted one (or its terminal error), and every
submitted request ends with exactly one terminal delta that carries usage.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.scheduler_fakes import FakeEngine, Harness, submit
from worker.runtime.handoff import ShutdownRequest

OPS = ("complete", "speech", "transcribe")

_submit = st.tuples(
    st.just("submit"),
    st.sampled_from(OPS + ("embed",)),  # "embed": no engine serves it
    st.integers(1, 4),  # max_tokens
    st.one_of(st.none(), st.integers(0, 3)),  # deadline, seconds from now
)
_abort = st.tuples(st.just("abort"), st.lists(st.integers(0, 12), max_size=4))
_tick = st.tuples(st.just("tick"), st.integers(1, 3))  # the clock moves on
_iterate = st.tuples(st.just("iterate"))
_actions = st.lists(st.one_of(_submit, _abort, _tick, _iterate), max_size=40)


_costs = st.lists(st.sampled_from([0.0, 0.001, 0.02, 0.3]), min_size=3, max_size=3)


def _run(
    actions, max_num_seqs: int, shutdown: bool, costs=(0.0, 0.0, 0.0)
) -> tuple[list[str], dict[str, list]]:
    engines = [FakeEngine(ops=(op,), cost=cost) for op, cost in zip(OPS, costs, strict=True)]
    h = Harness(max_num_seqs=max_num_seqs, engines=engines, idle_wait=0)
    submitted: list[str] = []
    seen: dict[str, list] = {}

    def iterate() -> None:
        for delta in h.step():  # asserts one Step per iteration
            seen.setdefault(delta.request_id, []).append(delta)

    for action in actions:
        if action[0] == "submit":
            _, op, max_tokens, after = action
            request_id = f"r{len(submitted)}"
            deadline = None if after is None else h.now + after
            h.put(submit(request_id, max_tokens=max_tokens, deadline=deadline, op=op))
            submitted.append(request_id)
        elif action[0] == "abort":
            h.handoff.aborts.add([f"r{i}" for i in action[1]])
        elif action[0] == "tick":
            h.now += action[1]
        else:
            iterate()
    if shutdown:  # everything still waiting or running ends with "abort"
        h.put(ShutdownRequest(call_id=1))
        assert h.scheduler.iteration() is False
        while not h.outbox.empty():
            message = h.outbox.get()
            for delta in getattr(message, "deltas", []):
                seen.setdefault(delta.request_id, []).append(delta)
    else:
        for _ in range(4 * len(submitted) + 8):
            iterate()
        for _ in range(2000):  # engines waiting their turn need more iterations to finish
            if all(any(d.finish_reason for d in seen.get(i, [])) for i in submitted):
                break
            iterate()
        for _ in range(3):  # and nothing comes after a terminal delta
            iterate()
    return submitted, seen


@settings(max_examples=300, deadline=None)
@given(actions=_actions, max_num_seqs=st.integers(1, 4), shutdown=st.booleans(), costs=_costs)
def test_every_request_ends_exactly_once_whatever_the_interleaving(
    actions, max_num_seqs, shutdown, costs
):
    submitted, seen = _run(actions, max_num_seqs, shutdown, costs)
    assert set(seen) == set(submitted)
    for request_id in submitted:
        deltas = seen[request_id]
        ends = [d for d in deltas if d.finish_reason is not None]
        assert len(ends) == 1, (request_id, deltas)
        assert deltas[-1] is ends[0], "nothing after the terminal delta"
        assert ends[0].usage is not None
        if len(deltas) > 1:
            first = deltas[0]
            assert (first.text, first.token_ids, first.finish_reason) == ("", [], None)
