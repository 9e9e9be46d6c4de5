"""Streamed text cut into spoken phrases (gateway/audio/speech/phrases.py): the first phrase
ends early (a clause boundary or FIRST_PHRASE_WORDS words) so speech starts sooner; the later
ones are sentences."""

from __future__ import annotations

import pytest

from gateway.audio.speech.phrases import FIRST_PHRASE_WORDS, Phrases


def spoken(text: str, step: int = 1, first_words: int = FIRST_PHRASE_WORDS) -> list[str]:
    """The phrases of `text` fed `step` characters at a time, as a model streams it."""
    phrases = Phrases(first_words)
    out = []
    for i in range(0, len(text), step):
        out += phrases.feed(text[i : i + step])
    return out + phrases.flush()


STORY = (
    "Of course, the sea was calm that morning. The boats went out early, and the gulls "
    "followed them far from the shore. Nobody spoke on the pier."
)


@pytest.mark.parametrize(
    "text, phrases",
    [
        # a clause boundary ends the first phrase; the others are sentences, commas and all
        (
            STORY,
            [
                "Of course,",
                "the sea was calm that morning.",
                "The boats went out early, and the gulls followed them far from the shore.",
                "Nobody spoke on the pier.",
            ],
        ),
        # no boundary: the first phrase ends after six words
        (
            "Paris is the capital and the largest city of France. It is big.",
            ["Paris is the capital and the", "largest city of France.", "It is big."],
        ),
        # a comma after one word is too early; a dash is a boundary
        ("Well, I know — it is so. Sure.", ["Well, I know —", "it is so.", "Sure."]),
        ("Yes - it is. Sure.", ["Yes - it is.", "Sure."]),  # "-" is not a word
        # a sentence end comes first
        ("Yes. Of course, it is.", ["Yes.", "Of course, it is."]),
        # a number's point or comma is no boundary while the number is written
        (
            "It costs 3,500 or 3.14 dollars, more or less. Yes.",
            ["It costs 3,500 or 3.14 dollars,", "more or less.", "Yes."],
        ),
        ("Hi, ok", ["Hi, ok"]),
        # a minus between numbers is no dash
        ("What is 5 - 3? Two.", ["What is 5 - 3?", "Two."]),
    ],
)
def test_the_first_phrase_ends_early_and_the_rest_are_sentences(text, phrases):
    assert spoken(text) == phrases
    assert spoken(text, step=7) == phrases  # however the text arrives
    assert " ".join(phrases) == text  # nothing lost, nothing added


def test_zero_first_words_cuts_the_first_phrase_like_the_others():
    assert spoken(STORY, first_words=0) == [
        "Of course, the sea was calm that morning.",
        "The boats went out early, and the gulls followed them far from the shore.",
        "Nobody spoke on the pier.",
    ]


def test_a_long_phrase_is_still_cut_at_a_space():
    words = " ".join(["word"] * 80)
    phrases = spoken(words, first_words=0)
    assert all(len(p) <= 160 for p in phrases) and " ".join(phrases) == words
