"""OpenAI's transcription / translation response formats: json, text, verbose_json, srt, vtt.

Pure functions of a finished `Transcript` (text, segments, language, usage), shared by the
HTTP route and the one-shot `transcribe` command. Shapes follow OpenAI's API:
- json: `{"text", "usage"}` with token usage (`input_tokens` = audio seconds, rounded up);
- verbose_json: `{"task", "language", "duration", "text", "segments": [{"id", "seek",
  "start", "end", "text", "tokens", "temperature", "avg_logprob", "compression_ratio",
  "no_speech_prob"}], "words" (only when asked), "usage"}` with duration usage, as whisper-1
  answers; `language` is an English name ("german"), "english" for a translation;
- text: the text and a newline; srt / vtt: one cue per non-empty segment, in order, inside
  the clip (the worker already bounds segment times: worker/transcription/timing.py; the cues
  hold to it again, since `duration` here is whole seconds).
Segment texts keep Whisper's leading space (as OpenAI's do); words and cues are stripped. A
decoding statistic that is not a finite number (a random or confused model's NaN or infinity)
is `null` in verbose_json: JSON has no such numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from protocol.messages import Segment, Usage

FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
MEDIA_TYPES = {
    "json": "application/json",
    "verbose_json": "application/json",
    "text": "text/plain; charset=utf-8",
    "srt": "application/x-subrip; charset=utf-8",
    "vtt": "text/vtt; charset=utf-8",
}

# Whisper's language codes and the names OpenAI's verbose_json reports (its `language` field).
LANGUAGE_NAMES = dict(
    pair.split(":")
    for pair in (
        "en:english zh:chinese de:german es:spanish ru:russian ko:korean fr:french ja:japanese "
        "pt:portuguese tr:turkish pl:polish ca:catalan nl:dutch ar:arabic sv:swedish it:italian "
        "id:indonesian hi:hindi fi:finnish vi:vietnamese he:hebrew uk:ukrainian el:greek "
        "ms:malay cs:czech ro:romanian da:danish hu:hungarian ta:tamil no:norwegian th:thai "
        "ur:urdu hr:croatian bg:bulgarian lt:lithuanian la:latin mi:maori ml:malayalam "
        "cy:welsh sk:slovak te:telugu fa:persian lv:latvian bn:bengali sr:serbian "
        "az:azerbaijani sl:slovenian kn:kannada et:estonian mk:macedonian br:breton eu:basque "
        "is:icelandic hy:armenian ne:nepali mn:mongolian bs:bosnian kk:kazakh sq:albanian "
        "sw:swahili gl:galician mr:marathi pa:punjabi si:sinhala km:khmer sn:shona yo:yoruba "
        "so:somali af:afrikaans oc:occitan ka:georgian be:belarusian tg:tajik sd:sindhi "
        "gu:gujarati am:amharic yi:yiddish lo:lao uz:uzbek fo:faroese ht:haitian_creole "
        "ps:pashto tk:turkmen nn:nynorsk mt:maltese sa:sanskrit lb:luxembourgish my:myanmar "
        "bo:tibetan tl:tagalog mg:malagasy as:assamese tt:tatar haw:hawaiian ln:lingala "
        "ha:hausa ba:bashkir jw:javanese su:sundanese yue:cantonese"
    ).split()
)


@dataclass(slots=True)
class Transcript:
    """A finished transcription, as the worker's deltas delivered it."""

    text: str
    task: str = "transcribe"  # or "translate"
    language: str = ""  # what the worker reported: a code ("en") or a model's own name
    segments: list[Segment] = field(default_factory=list)
    usage: Usage = field(default_factory=lambda: Usage(0, 0))
    # Audio seconds. The worker reports whole seconds (usage.prompt_tokens, rounded up).
    duration: float = 0.0


def render(fmt: str, transcript: Transcript, words: bool = False) -> str | dict[str, Any]:
    """The response body: a JSON object for json / verbose_json, a string otherwise."""
    if fmt == "json":
        return {"text": transcript.text, "usage": token_usage(transcript.usage)}
    if fmt == "verbose_json":
        return verbose_json(transcript, words)
    if fmt == "text":
        return transcript.text + "\n"
    if fmt == "srt":
        return srt(transcript.segments, transcript.duration)
    if fmt == "vtt":
        return vtt(transcript.segments, transcript.duration)
    raise ValueError(f"unknown response format {fmt!r}")


def token_usage(usage: Usage) -> dict[str, Any]:
    """OpenAI's token usage; the audio's input tokens are its seconds, rounded up."""
    return {
        "type": "tokens",
        "input_tokens": usage.prompt_tokens,
        "input_token_details": {"audio_tokens": usage.prompt_tokens, "text_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }


def language_name(language: str) -> str:
    """OpenAI reports languages by lower-case English name ("english")."""
    key = language.strip().lower()
    return LANGUAGE_NAMES.get(key, key)


def verbose_json(transcript: Transcript, words: bool) -> dict[str, Any]:
    # A translation reports its output language, as OpenAI's (always English).
    translated = transcript.task == "translate"
    body: dict[str, Any] = {
        "task": transcript.task,
        "language": "english" if translated else language_name(transcript.language),
        "duration": transcript.duration,
        "text": transcript.text,
        "segments": [
            {
                "id": s.id,
                "seek": s.seek,
                "start": finite_or_none(s.start),
                "end": finite_or_none(s.end),
                "text": s.text,
                "tokens": s.tokens,
                "temperature": finite_or_none(s.temperature),
                "avg_logprob": finite_or_none(s.avg_logprob),
                "compression_ratio": finite_or_none(s.compression_ratio),
                "no_speech_prob": finite_or_none(s.no_speech_prob),
            }
            for s in transcript.segments
        ],
    }
    if words:
        body["words"] = [
            {"word": str(word).strip(), "start": finite_or_none(start), "end": finite_or_none(end)}
            for s in transcript.segments
            for word, start, end in s.words
        ]
    body["usage"] = {"type": "duration", "seconds": transcript.usage.prompt_tokens}
    return body


def finite_or_none(value: float) -> float | None:
    """JSON numbers are finite: NaN and infinities become null."""
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def timestamp(seconds: float, separator: str = ",") -> str:
    """HH:MM:SS,mmm (SRT) or HH:MM:SS.mmm (VTT); negative times clamp to zero."""
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{millis:03d}"


def _cues(segments: list[Segment], duration: float) -> list[tuple[float, float, str]]:
    """(start, end, text) per non-empty segment: starts never going back, ends never before
    their start, both within `duration` (when known, > 0)."""
    limit = duration if duration > 0 else math.inf
    cues: list[tuple[float, float, str]] = []
    floor = 0.0
    for s in segments:
        # One line, and no arrow: a blank line would end the cue, "-->" starts a timing line.
        text = " ".join(s.text.split()).replace("-->", "->")
        if not text:
            continue
        start = min(max(_finite(s.start, floor), floor), limit)
        end = min(max(_finite(s.end, start), start), limit)
        cues.append((start, end, text))
        floor = start
    return cues


def _finite(value: float, otherwise: float) -> float:
    number = finite_or_none(value)
    return otherwise if number is None else number


def srt(segments: list[Segment], duration: float = 0.0) -> str:
    blocks = [
        f"{i}\n{timestamp(start)} --> {timestamp(end)}\n{text}\n"
        for i, (start, end, text) in enumerate(_cues(segments, duration), 1)
    ]
    return "\n".join(blocks)


def vtt(segments: list[Segment], duration: float = 0.0) -> str:
    blocks = [
        f"{timestamp(start, '.')} --> {timestamp(end, '.')}\n{text}\n"
        for start, end, text in _cues(segments, duration)
    ]
    return "WEBVTT\n\n" + "\n".join(blocks)
