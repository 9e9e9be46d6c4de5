"""What speculation proposes (prompt lookup) and how much (each sequence's gate); no model."""

from __future__ import annotations

import pytest

from worker.text.speculation.adaptive import FIRST_PAUSE, MAX_PAUSE, DraftGate
from worker.text.speculation.counters import SpecCounts
from worker.text.speculation.ngram import NgramIndex


def test_the_continuation_of_the_latest_earlier_match_of_the_last_three_tokens():
    index = NgramIndex(2, 3)
    #        0  1  2  3  4  5  6  7  8  9  10 11
    text = [1, 2, 3, 4, 5, 9, 2, 3, 4, 7, 8, 2, 3]
    # last 3 tokens with 4 appended: (2, 3, 4), seen at 1-3 (then 4, 5) and 6-8 (then 7, 8)
    assert index.propose(text, 4, 2) == [7, 8]
    assert index.propose(text, 4, 5) == [7, 8, 2, 3, 4]  # runs into the text it predicts


def test_a_shorter_ngram_answers_when_the_longer_one_never_occurred():
    index = NgramIndex(2, 3)
    text = [5, 6, 1, 2, 9, 8, 7, 1]
    # (7, 1, 2) never occurred; (1, 2) did, followed by 9, 8
    assert index.propose(text, 2, 2) == [9, 8]
    assert NgramIndex(3, 3).propose(text, 2, 2) == []


def test_no_match_no_proposal_and_k_zero_proposes_nothing():
    index = NgramIndex(2, 3)
    assert index.propose([1, 2, 3], 4, 3) == []
    assert index.propose([1, 2, 1], 2, 0) == []


def test_a_repeating_pattern_is_continued_past_the_end_of_the_text():
    index = NgramIndex(2, 3)
    assert index.propose([7, 7, 7], 7, 4) == [7, 7, 7, 7]
    assert index.propose([7, 7, 7, 1, 2, 1, 2], 1, 5) == [2, 1, 2, 1, 2]


def test_the_index_grows_with_the_sequence_and_refuses_to_shrink():
    index = NgramIndex(2, 2)
    seq = [1, 2, 3]
    assert index.propose(seq, 1, 2) == []
    seq += [1, 2, 4, 1]
    # (1, 2) latest at 4-5, followed by 4
    assert index.propose(seq, 2, 2) == [4, 1]
    with pytest.raises(ValueError):
        index.propose([1], 2, 2)
    with pytest.raises(ValueError):
        NgramIndex(3, 2)


def test_the_gate_follows_the_run_length_up_to_the_maximum():
    gate = DraftGate(5)
    assert gate.next_length() == 5
    gate.record(5, 2)
    assert gate.next_length() == 3  # what was accepted + 1
    gate.record(3, 3)
    assert gate.next_length() == 4  # everything accepted: one more
    for _ in range(4):
        gate.record(gate.next_length(), gate.next_length())
    assert gate.next_length() == 5


def test_poor_acceptance_pauses_proposals_for_longer_each_time_until_one_holds():
    gate = DraftGate(4)
    pauses = []
    for _ in range(5):
        while gate.next_length():
            gate.record(gate.next_length(), 0)
        steps = 1
        while not gate.next_length():
            steps += 1
        pauses.append(steps)
    assert pauses[0] == FIRST_PAUSE
    assert pauses == sorted(pauses) and pauses[-1] <= MAX_PAUSE and pauses[-1] > pauses[0]
    gate.record(1, 1)  # a probe that holds: the next pause is short again
    while gate.next_length():
        gate.record(gate.next_length(), 0)
    assert sum(1 for _ in iter(lambda: gate.next_length() == 0, False)) == FIRST_PAUSE - 1


def test_counts_per_position_and_differences():
    counts = SpecCounts()
    counts.add(3, 2)
    before = counts.copy()
    counts.add(4, 4)
    counts.add(2, 0)
    counts.add(0, 0)  # no proposals: no draft
    assert (counts.drafts, counts.draft_tokens, counts.accepted_tokens) == (3, 9, 6)
    assert counts.accepted_per_position == [2, 2, 1, 1]
    new = counts.since(before)
    assert (new.drafts, new.draft_tokens, new.accepted_tokens) == (2, 6, 4)
    assert new.accepted_per_position == [1, 1, 1, 1]
    assert counts.describe() == " spec=6/9 accepted (67%) in 3 drafts"
    assert SpecCounts().describe() == ""
