"""Strict SRT and WebVTT readers: each cue's number (SRT), start, end and one text line."""

from __future__ import annotations

import re

SRT_TIMING = re.compile(r"^(\d{2}):(\d{2}):(\d{2}),(\d{3}) --> (\d{2}):(\d{2}):(\d{2}),(\d{3})$")
VTT_TIMING = re.compile(r"^(\d{2}):(\d{2}):(\d{2})\.(\d{3}) --> (\d{2}):(\d{2}):(\d{2})\.(\d{3})$")


def parse_srt(body: str) -> list[tuple[int, float, float, str]]:
    """A strict SRT reader: number, timing, one text line, blank line."""
    cues = []
    for block in body.strip("\n").split("\n\n"):
        number, timing, text = block.split("\n")
        match = SRT_TIMING.match(timing)
        assert match, timing
        h1, m1, s1, ms1, h2, m2, s2, ms2 = map(int, match.groups())
        start = h1 * 3600 + m1 * 60 + s1 + ms1 / 1000
        end = h2 * 3600 + m2 * 60 + s2 + ms2 / 1000
        assert start <= end
        cues.append((int(number), start, end, text))
    assert [c[0] for c in cues] == list(range(1, len(cues) + 1))
    return cues


def parse_vtt(body: str) -> list[tuple[float, float, str]]:
    header, _, rest = body.partition("\n\n")
    assert header == "WEBVTT"
    cues = []
    for block in rest.strip("\n").split("\n\n"):
        timing, text = block.split("\n")
        match = VTT_TIMING.match(timing)
        assert match, timing
        h1, m1, s1, ms1, h2, m2, s2, ms2 = map(int, match.groups())
        cues.append(
            (h1 * 3600 + m1 * 60 + s1 + ms1 / 1000, h2 * 3600 + m2 * 60 + s2 + ms2 / 1000, text)
        )
    return cues
