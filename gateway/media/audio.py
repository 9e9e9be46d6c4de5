"""Check an audio clip before the worker sees it: a declared format the worker decodes (wav or
mp3) whose bytes start like that format, under the byte cap (checked when it was read). A clip
fetched from a URL declares no format: its bytes must start like one of them."""

from __future__ import annotations

from gateway.media.problems import INVALID, MediaRejected

AUDIO_FORMATS = ("wav", "mp3")


def _looks_like(data: bytes, fmt: str) -> bool:
    if fmt == "wav":
        return len(data) >= 12 and data[:4] in (b"RIFF", b"RIFX", b"RF64") and data[8:12] == b"WAVE"
    # mp3: an ID3v2 tag, or an MPEG audio frame sync (11 set bits).
    return data[:3] == b"ID3" or (len(data) >= 2 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0)


def sniff_audio_format(data: bytes) -> str | None:
    """The format of an audio clip that came without one (an `audio_url`), from its bytes."""
    return next((fmt for fmt in AUDIO_FORMATS if _looks_like(data, fmt)), None)


def check_audio(data: bytes, fmt: str, what: str = "the audio") -> None:
    if fmt not in AUDIO_FORMATS:
        raise MediaRejected(f"audio format {fmt!r} is not one of {list(AUDIO_FORMATS)}", INVALID)
    if not _looks_like(data, fmt):
        raise MediaRejected(f"{what} is not {fmt} data", INVALID)
