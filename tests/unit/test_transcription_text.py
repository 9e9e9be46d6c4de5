"""Text deltas of a growing transcript: stable, never a split character, joined = final."""

from __future__ import annotations

from worker.transcription.text import TranscriptDeltas

SNOWMAN = "☃"  # 3 bytes in UTF-8


def test_deltas_join_to_the_stripped_final_text():
    deltas = TranscriptDeltas()
    parts = [
        deltas.update(" Hello"),
        deltas.update(" Hello world."),
        deltas.finish(" Hello world. "),
    ]
    assert "".join(parts) == "Hello world."


def test_a_character_split_across_windows_is_held_back():
    # The first window's tokens end inside a multi-byte character: it decodes to U+FFFD.
    deltas = TranscriptDeltas()
    first = deltas.update(" snow \ufffd")
    second = deltas.update(f" snow {SNOWMAN} man")
    assert "\ufffd" not in first + second
    assert first + second + deltas.finish(f" snow {SNOWMAN} man") == f"snow {SNOWMAN} man"


def test_trailing_whitespace_waits_for_the_next_window():
    deltas = TranscriptDeltas()
    assert deltas.update(" one ") == "one"
    assert deltas.update(" one two") == " two"


def test_leading_whitespace_is_never_sent():
    deltas = TranscriptDeltas()
    assert deltas.update("   ") == ""
    assert deltas.update("  text") == "text"


def test_finish_after_a_rewritten_transcript_sends_the_differing_rest():
    deltas = TranscriptDeltas()
    deltas.update(" abc")
    assert deltas.finish(" abd") == "d"
