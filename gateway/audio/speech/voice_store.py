"""Saved voices for cloning: reference audio + transcript kept in the gateway's memory.

`POST /v1/audio/voices` stores one (OpenAI's custom-voice shape: an `audio.voice` object with
an `id`), `DELETE /v1/audio/voices/{id}` drops it, and a speech request names it as
`voice: "<name>"` or `voice: {"id": "voice_..."}`; the gateway then sends its audio and
transcript to the worker as `ref_audio` / `ref_text`, exactly as if the client had sent them.

The store lives in the gateway process, so saved voices survive worker restarts and model
swaps, and are lost when the server stops. It is bounded in count and bytes so that uploads
cannot grow the gateway without limit. The gateway never decodes audio: the bytes are only
sniffed for a known container at upload; the worker decodes them on use (a voice that does
not decode is a 400 naming it then).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from gateway.http.errors import APIError, invalid

MAX_VOICES = 20  # OpenAI's limit of custom voices per organisation
MAX_VOICE_BYTES = 10 * 1024 * 1024  # one reference clip (as for `ref_audio`)
MAX_TOTAL_BYTES = 64 * 1024 * 1024
MAX_NAME_CHARS = 256  # OpenAI's limit for a voice name
MAX_TRANSCRIPT_CHARS = 4096


@dataclass(frozen=True, slots=True)
class SavedVoice:
    id: str
    name: str
    audio: bytes
    transcript: str | None
    created_at: int

    def public(self) -> dict[str, Any]:
        """The voice object clients see (OpenAI's `audio.voice`, plus what this server adds)."""
        return {
            "id": self.id,
            "object": "audio.voice",
            "type": "audio_sample",
            "name": self.name,
            "created_at": self.created_at,
            "transcript": self.transcript,
            "bytes": len(self.audio),
        }


# Leading bytes of the containers the worker's decoder reads (WAV, FLAC, Ogg, MP3, MP4/M4A,
# WebM/Matroska, AIFF, CAF). Anything else cannot be audio it decodes: refused at upload.
_MAGIC = (b"RIFF", b"fLaC", b"OggS", b"ID3", b"\x1a\x45\xdf\xa3", b"FORM", b"caff")


def looks_like_audio(data: bytes) -> bool:
    if data.startswith(_MAGIC):
        return True
    if len(data) >= 2 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0:  # MPEG / ADTS frame sync
        return True
    return data[4:8] == b"ftyp"  # MP4 / M4A


@dataclass
class VoiceStore:
    """Saved voices by id, in creation order; names are unique (case-insensitive)."""

    max_voices: int = MAX_VOICES
    max_total_bytes: int = MAX_TOTAL_BYTES
    _voices: dict[str, SavedVoice] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._voices)

    def total_bytes(self) -> int:
        return sum(len(v.audio) for v in self._voices.values())

    def list(self) -> list[SavedVoice]:
        return list(self._voices.values())

    def add(self, name: str, audio: bytes, transcript: str | None) -> SavedVoice:
        """Store a voice; a 400 naming the field when it cannot be stored."""
        name = name.strip()
        if not name or len(name) > MAX_NAME_CHARS:
            raise invalid("name", f"`name` must be 1 to {MAX_NAME_CHARS} characters")
        if self.by_name(name) is not None:
            raise invalid("name", f"a saved voice named {name!r} exists: delete it first")
        if not audio:
            raise invalid("audio_sample", "`audio_sample` is empty")
        if len(audio) > MAX_VOICE_BYTES:
            raise invalid("audio_sample", f"`audio_sample` exceeds {MAX_VOICE_BYTES} bytes")
        if not looks_like_audio(audio):
            raise invalid(
                "audio_sample",
                "`audio_sample` is not an audio file (WAV, FLAC, MP3, Ogg, M4A, WebM, AIFF, CAF)",
            )
        if transcript is not None and len(transcript) > MAX_TRANSCRIPT_CHARS:
            raise invalid("transcript", f"`transcript` exceeds {MAX_TRANSCRIPT_CHARS} characters")
        if len(self._voices) >= self.max_voices:
            raise _full(f"this server keeps at most {self.max_voices} saved voices")
        if self.total_bytes() + len(audio) > self.max_total_bytes:
            raise _full(f"saved voices may hold at most {self.max_total_bytes} bytes of audio")
        voice = SavedVoice(
            id=f"voice_{secrets.token_hex(12)}",
            name=name,
            audio=audio,
            transcript=transcript or None,
            created_at=int(time.time()),
        )
        self._voices[voice.id] = voice
        return voice

    def get(self, voice_id: str) -> SavedVoice | None:
        return self._voices.get(voice_id)

    def by_name(self, name: str) -> SavedVoice | None:
        folded = name.strip().casefold()
        return next((v for v in self._voices.values() if v.name.casefold() == folded), None)

    def delete(self, voice_id: str) -> SavedVoice:
        voice = self._voices.pop(voice_id, None)
        if voice is None:
            raise not_found(voice_id)
        return voice


def not_found(voice_id: str) -> APIError:
    return APIError(
        404, f"No saved voice with id {voice_id!r}", param="voice_id", code="voice_not_found"
    )


def _full(message: str) -> APIError:
    return APIError(400, f"{message}: delete one first", param=None, code="voice_limit_reached")
