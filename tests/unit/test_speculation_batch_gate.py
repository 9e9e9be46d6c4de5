"""The batch gate (worker/text/speculation/adaptive.py BatchGate): a batch of several rows
verifies while verified steps return more tokens per second than plain ones, tries the other
way now and then, and times nothing across a change of batch size or of way."""

from __future__ import annotations

from worker.text.speculation.adaptive import BatchGate


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run(gate: BatchGate, clock: Clock, size: int, steps: int, cost: dict[bool, tuple[float, int]]):
    """`steps` steps of a batch of `size`; a step of each way takes cost[way][0] seconds and
    returns cost[way][1] tokens. Returns the ways taken."""
    ways = []
    for _ in range(steps):
        verified = gate.allows(size)
        seconds, tokens = cost[verified]
        gate.ran(size, verified, tokens)
        clock.now += seconds
        ways.append(verified)
    return ways


def test_a_batch_keeps_verifying_while_it_pays():
    clock = Clock()
    gate = BatchGate(clock)
    # Verified: 8 rows x 2.5 tokens in 0.2 s = 100 tok/s; plain: 8 tokens in 0.1 s = 80 tok/s.
    ways = run(gate, clock, 8, 200, {True: (0.2, 20), False: (0.1, 8)})
    assert round(gate.rate(8, True), 6) == 100 and round(gate.rate(8, False), 6) == 80
    assert sum(ways[-160:]) / 160 > 0.8  # mostly verifying, with the exploration turns plain


def test_a_batch_stops_verifying_when_plain_steps_are_faster():
    clock = Clock()
    gate = BatchGate(clock)
    # Free-form text: verified steps return 9 tokens in 0.2 s (45 tok/s), plain 8 in 0.1 s.
    ways = run(gate, clock, 8, 200, {True: (0.2, 9), False: (0.1, 8)})
    assert sum(ways[-160:]) / 160 < 0.2  # mostly plain, exploring the other way now and then
    assert any(ways[-32:])  # still trying


def test_the_gate_follows_a_change_in_what_pays():
    clock = Clock()
    gate = BatchGate(clock)
    run(gate, clock, 8, 100, {True: (0.2, 9), False: (0.1, 8)})  # stories
    ways = run(gate, clock, 8, 200, {True: (0.2, 30), False: (0.1, 8)})  # then quoting
    assert sum(ways[-100:]) / 100 > 0.8


def test_a_batch_of_one_always_may_verify():
    clock = Clock()
    gate = BatchGate(clock)
    ways = run(gate, clock, 1, 50, {True: (0.2, 1), False: (0.01, 1)})
    assert all(ways)
    assert gate.rate(1, True) is None  # nothing timed for a single row


def test_nothing_is_timed_across_a_change_of_batch_size_or_the_first_step_of_a_way():
    clock = Clock()
    gate = BatchGate(clock)
    assert gate.allows(4)
    gate.ran(4, True, 10)
    clock.now += 1.0
    assert gate.allows(8)  # the batch grew: the step of 4 is not timed
    gate.ran(8, True, 10)
    clock.now += 1.0
    gate.allows(8)  # closes the first verified step of 8: untimed, it followed no step of 8
    assert gate.rate(8, True) is None and gate.rate(4, True) is None
    gate.ran(8, True, 10)
    clock.now += 0.5
    gate.allows(8)
    assert round(gate.rate(8, True), 6) == 20
