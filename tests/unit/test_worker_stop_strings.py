"""StopStringMatcher: safe streaming of text with stop strings (pure Python, no MLX)."""

from __future__ import annotations

import pytest

from worker.text.stop_strings import StopStringMatcher


def run(stops: list[str], pieces: list[str]) -> tuple[list[str], bool, int]:
    """Feeds pieces until a stop; returns (emitted pieces incl. flush, stopped, pieces consumed)."""
    matcher = StopStringMatcher(stops)
    emitted = []
    for n, piece in enumerate(pieces, start=1):
        text, stopped = matcher.feed(piece)
        emitted.append(text)
        if stopped:
            return emitted, True, n
    emitted.append(matcher.flush())
    return emitted, False, len(pieces)


def test_without_stop_strings_text_passes_through_unchanged():
    matcher = StopStringMatcher([])
    assert matcher.feed("hello") == ("hello", False)
    assert matcher.flush() == ""


def test_text_that_cannot_start_a_stop_string_is_emitted_at_once():
    matcher = StopStringMatcher(["END"])
    assert matcher.feed("hello ") == ("hello ", False)


def test_a_possible_start_of_a_stop_string_is_held_back():
    matcher = StopStringMatcher(["END"])
    assert matcher.feed("hello E") == ("hello ", False)
    assert matcher.feed("N") == ("", False)


def test_held_back_text_is_released_when_it_turns_out_not_to_be_a_stop_string():
    matcher = StopStringMatcher(["END"])
    matcher.feed("hello EN")
    assert matcher.feed("D") == ("", True)
    matcher = StopStringMatcher(["END"])
    matcher.feed("hello EN")
    assert matcher.feed("x") == ("ENx", False)


def test_a_stop_string_within_one_piece_truncates_before_it():
    emitted, stopped, _ = run(["END"], ["abcENDdef"])
    assert stopped
    assert "".join(emitted) == "abc"


def test_a_stop_string_spanning_several_pieces_is_detected():
    emitted, stopped, consumed = run(["<stop>"], ["ab", "<s", "to", "p>", "more"])
    assert stopped
    assert consumed == 4
    assert "".join(emitted) == "ab"


def test_no_part_of_a_stop_string_is_ever_emitted():
    pieces = ["x", "<", "s", "t", "o", "p", ">"]
    emitted, stopped, _ = run(["<stop>"], pieces)
    assert stopped
    assert all("<" not in piece for piece in emitted)


def test_flush_returns_held_back_text_at_the_end():
    matcher = StopStringMatcher(["END"])
    assert matcher.feed("the E") == ("the ", False)
    assert matcher.flush() == "E"


def test_the_earliest_of_several_stop_strings_wins():
    emitted, stopped, _ = run(["world", "lo"], ["hello world"])
    assert stopped
    assert "".join(emitted) == "hel"


def test_the_matched_stop_string_is_recorded():
    matcher = StopStringMatcher(["world", "lo"])
    assert matcher.matched == ""
    matcher.feed("hel")
    assert matcher.matched == ""
    matcher.feed("lo world")
    assert matcher.matched == "lo"


def test_a_stop_string_at_the_very_start_emits_nothing():
    emitted, stopped, _ = run(["abc"], ["abc"])
    assert stopped
    assert "".join(emitted) == ""


def test_after_a_stop_later_text_is_dropped():
    matcher = StopStringMatcher(["x"])
    matcher.feed("ax")
    assert matcher.feed("more") == ("", True)
    assert matcher.flush() == ""


def test_the_longest_possible_prefix_is_held_when_stops_overlap():
    matcher = StopStringMatcher(["abcd", "bx"])
    # "abc" may become "abcd"; "c" alone starts neither, but the longer match must be kept.
    assert matcher.feed("zabc") == ("z", False)
    assert matcher.feed("d") == ("", True)


def test_repeated_prefix_characters_do_not_hide_a_stop_string():
    emitted, stopped, _ = run(["aab"], ["a", "a", "a", "b"])
    assert stopped
    assert "".join(emitted) == "a"


def test_empty_stop_strings_are_ignored():
    matcher = StopStringMatcher(["", "Z"])
    assert matcher.active
    assert matcher.feed("abc") == ("abc", False)
    assert not StopStringMatcher([""]).active


@pytest.mark.parametrize(
    "text",
    ["", "plain text", "ends with <st", "has <stop> inside", "<stop>", "<<stop>", "x<sto"],
)
def test_joined_output_is_the_text_truncated_before_the_stop_string(text):
    # Feed character by character: the joined output must equal a one-shot truncation.
    emitted, _, _ = run(["<stop>"], list(text))
    cut = text.find("<stop>")
    assert "".join(emitted) == (text if cut < 0 else text[:cut])


def test_unicode_stop_strings_work():
    emitted, stopped, _ = run(["。"], ["你好", "。再见"])
    assert stopped
    assert "".join(emitted) == "你好"
