"""Streamed text cut into spoken phrases (gateway/audio/speech/phrases.py): the first phrase
ends early (a clause boundary or FIRST_PHRASE_WORDS words) so speech starts sooner; the later
ones are sentences. Phrases spoken in a row carry the context the one before handed back; a
refused context is dropped."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from gateway.audio.speech.phrases import FIRST_PHRASE_WORDS, Phrases, PhraseSpeaker, Voice
from gateway.http.errors import APIError
from protocol.inputs import SpeechInputs
from protocol.messages import Delta, ErrorCode, ErrorInfo, FinishReason


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


class _TTS:
    """An engine client whose speech requests answer from `answers` (a list of delta lists,
    one per request, in order) and record the inputs they were sent."""

    def __init__(self, answers: list[list]) -> None:
        self.answers, self.sent = answers, []

    @contextlib.asynccontextmanager
    async def request(self, inputs, stream):
        self.sent.append(inputs)
        deltas = self.answers.pop(0)

        async def batches():
            for delta in deltas:
                yield [delta]

        yield batches()


def _speak_all(speaker: PhraseSpeaker, phrases: list[str]) -> list[bytes]:
    async def run() -> list[bytes]:
        return [d.audio for phrase in phrases async for d in speaker.speak(phrase)]

    return asyncio.run(run())


VOICE = Voice(SpeechInputs(".", voice="vivian"), 24000)


def test_each_phrase_carries_the_context_the_one_before_handed_back():
    tts = _TTS([
        [Delta("a", audio=b"\x01\x00"), Delta("a", finish_reason=FinishReason.STOP, speech_context=b"ctx-1")],
        [Delta("b", audio=b"\x02\x00"), Delta("b", finish_reason=FinishReason.STOP)],
        [Delta("c", finish_reason=FinishReason.STOP)],
    ])  # fmt: skip
    audio = _speak_all(PhraseSpeaker(tts, VOICE), ["One,", "two.", "Three."])
    assert audio == [b"\x01\x00", b"\x02\x00"]
    assert [(i.input, i.context) for i in tts.sent] == [
        ("One,", None), ("two.", b"ctx-1"), ("Three.", None),
    ]  # fmt: skip
    assert all(i.voice == "vivian" for i in tts.sent)


def test_a_refused_context_is_dropped_and_the_phrase_spoken_alone():
    refused = ErrorInfo(ErrorCode.BAD_REQUEST, "context: model x cannot continue this request")
    tts = _TTS([
        [Delta("a", finish_reason=FinishReason.STOP, speech_context=b"ctx")],
        [Delta("b", finish_reason=FinishReason.ERROR, error=refused)],
        [Delta("c", audio=b"\x03\x00"), Delta("c", finish_reason=FinishReason.STOP)],
    ])  # fmt: skip
    assert _speak_all(PhraseSpeaker(tts, VOICE), ["One,", "two."]) == [b"\x03\x00"]
    assert [(i.input, i.context) for i in tts.sent] == [
        ("One,", None), ("two.", b"ctx"), ("two.", None),
    ]  # fmt: skip


def test_another_error_is_raised():
    bad = ErrorInfo(ErrorCode.BAD_REQUEST, "input must be a non-empty string")
    tts = _TTS([[Delta("a", finish_reason=FinishReason.ERROR, error=bad)]])
    with pytest.raises(APIError, match="non-empty"):
        _speak_all(PhraseSpeaker(tts, VOICE), ["One,"])
