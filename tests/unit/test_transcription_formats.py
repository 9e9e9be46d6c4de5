"""OpenAI's transcription response formats, rendered from a finished transcript."""

from __future__ import annotations

import pytest

from gateway.audio.transcription.formats import (
    Transcript,
    language_name,
    render,
    srt,
    timestamp,
    vtt,
)
from protocol.messages import Segment, Usage
from tests.support.subtitles import parse_srt, parse_vtt


def segments() -> list[Segment]:
    return [
        Segment(
            0,
            0.0,
            2.5,
            " Hello world.",
            [[" Hello", 0.0, 1.0], [" world.", 1.0, 2.5]],
            seek=0,
            tokens=[50364, 2425, 1002, 13, 50489],
            temperature=0.0,
            avg_logprob=-0.25,
            compression_ratio=0.9,
            no_speech_prob=0.01,
        ),
        Segment(1, 2.5, 2.5, ""),  # Whisper keeps emptied segments; cues skip them
        Segment(2, 31.25, 3725.5, " Second\n line --> here."),
    ]


def transcript() -> Transcript:
    return Transcript(
        text="Hello world. Second line here.",
        task="transcribe",
        language="en",
        segments=segments(),
        usage=Usage(3726, 12),
        duration=3726.0,
    )


def test_json_has_the_text_and_token_usage():
    body = render("json", transcript())
    assert body["text"] == "Hello world. Second line here."
    assert body["usage"]["type"] == "tokens"
    assert (body["usage"]["input_tokens"], body["usage"]["output_tokens"]) == (3726, 12)
    assert body["usage"]["total_tokens"] == 3738


def test_text_is_the_transcript_and_a_newline():
    assert render("text", transcript()) == "Hello world. Second line here.\n"


def test_verbose_json_has_language_name_duration_segments_and_duration_usage():
    body = render("verbose_json", transcript())
    assert body["task"] == "transcribe" and body["language"] == "english"
    assert body["duration"] == 3726.0
    assert [s["id"] for s in body["segments"]] == [0, 1, 2]
    assert body["segments"][0] == {
        "id": 0,
        "seek": 0,
        "start": 0.0,
        "end": 2.5,
        "text": " Hello world.",
        "tokens": [50364, 2425, 1002, 13, 50489],
        "temperature": 0.0,
        "avg_logprob": -0.25,
        "compression_ratio": 0.9,
        "no_speech_prob": 0.01,
    }
    assert body["usage"] == {"type": "duration", "seconds": 3726}
    assert "words" not in body


def test_verbose_json_lists_stripped_words_when_asked():
    body = render("verbose_json", transcript(), words=True)
    assert body["words"] == [
        {"word": "Hello", "start": 0.0, "end": 1.0},
        {"word": "world.", "start": 1.0, "end": 2.5},
    ]


def test_srt_parses_with_one_cue_per_non_empty_segment():
    cues = parse_srt(srt(segments()))
    assert cues == [
        (1, 0.0, 2.5, "Hello world."),
        (2, 31.25, 3725.5, "Second line -> here."),
    ]


def test_vtt_parses_with_one_cue_per_non_empty_segment():
    cues = parse_vtt(vtt(segments()))
    assert cues == [(0.0, 2.5, "Hello world."), (31.25, 3725.5, "Second line -> here.")]


def test_subtitles_of_no_speech_are_empty_but_valid():
    assert srt([]) == ""
    assert vtt([]) == "WEBVTT\n\n"


@pytest.mark.parametrize(
    ("seconds", "srt_form", "vtt_form"),
    [
        (0.0, "00:00:00,000", "00:00:00.000"),
        (61.0005, "00:01:01,000", "00:01:01.000"),
        (3725.4996, "01:02:05,500", "01:02:05.500"),
        (-0.02, "00:00:00,000", "00:00:00.000"),
    ],
)
def test_timestamps_use_hours_minutes_seconds_milliseconds(seconds, srt_form, vtt_form):
    assert timestamp(seconds) == srt_form
    assert timestamp(seconds, ".") == vtt_form


def test_translation_reports_english_as_its_language():
    translated = transcript()
    translated.task, translated.language = "translate", "de"
    assert render("verbose_json", translated)["language"] == "english"


def test_language_names_follow_openai_and_pass_unknown_names_through():
    assert language_name("de") == "german"
    assert language_name("English") == "english"


def test_unknown_format_is_an_error():
    with pytest.raises(ValueError):
        render("docx", transcript())


def _confused() -> list[Segment]:
    """What a random-weight Whisper can report: statistics that are not numbers, a segment
    starting before the one ahead of it, an end past the clip."""
    nan, inf = float("nan"), float("inf")
    return [
        Segment(
            0,
            1.0,
            2.0,
            " one",
            [[" one", nan, inf]],
            avg_logprob=-inf,
            compression_ratio=nan,
            no_speech_prob=nan,
            temperature=inf,
        ),  # fmt: skip
        Segment(1, 0.5, nan, " two", compression_ratio=inf),
        Segment(2, 2.5, 9.0, " three"),
    ]


def test_verbose_json_writes_statistics_that_are_not_finite_as_null():
    import json

    confused = Transcript("one two three", segments=_confused(), duration=3.0)
    body = render("verbose_json", confused, words=True)
    text = json.dumps(body, allow_nan=False)  # what the JSON response does: no NaN allowed
    first, second = json.loads(text)["segments"][:2]
    assert first["avg_logprob"] is None and first["compression_ratio"] is None
    assert first["no_speech_prob"] is None and first["temperature"] is None
    assert second["compression_ratio"] is None and second["end"] is None
    assert body["words"] == [{"word": "one", "start": None, "end": None}]


@pytest.mark.parametrize("fmt", ["srt", "vtt"])
def test_subtitle_cues_never_go_backwards_or_past_the_clip(fmt):
    text = srt(_confused(), 3.0) if fmt == "srt" else vtt(_confused(), 3.0)
    cues = parse_srt(text) if fmt == "srt" else [(0, *c) for c in parse_vtt(text)]
    times = [(start, end) for _, start, end, _ in cues]
    assert times == [(1.0, 2.0), (1.0, 1.0), (2.5, 3.0)]


def test_the_worker_bounds_segment_times_to_the_clip_in_order():
    from worker.transcription.timing import bounded_segments

    bounded = bounded_segments(_confused(), 2.75)
    assert [(s.start, s.end) for s in bounded] == [(1.0, 2.0), (1.0, 1.0), (2.5, 2.75)]
    assert bounded[0].words == [[" one", 1.0, 1.0]]  # not numbers: the earliest time allowed
