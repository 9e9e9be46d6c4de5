"""Kokoro speaking text: the server's front end (worker/speech/kokoro_text.py) in front of
mlx-audio's Kokoro model, in place of mlx-audio's `Model.generate`.

Per chunk of at most 510 phonemes, the call is mlx-audio's own
(`KokoroPipeline.infer`): `model(phonemes, pack[len(phonemes) - 1], speed)`, with the voice
pack `voices/<voice>.safetensors` of the checkpoint (read here; mlx-audio would look for a
missing one on the hub). The tests compare the engine with exactly that, chunk by chunk.

Its weight-normed convolutions normalize their weights once, not on every call
(worker/speech/kokoro_weights.py); on the CPU, the decoder's slow operations are replaced by
their fast forms first (worker/speech/kokoro_fast.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx

from worker.runtime.errors import bad_request
from worker.speech import kokoro_fast, kokoro_weights
from worker.speech.kokoro_text import (
    ALIASES,
    ESPEAK_NEEDS,
    ESPEAK_VOICES,
    G2P,
    chunks,
    language_code,
    load_g2p,
)

log = logging.getLogger(__name__)

MLX_AUDIO_DEFAULT_VOICE = "af_heart"  # what mlx-audio's Kokoro speaks with when given no voice
ENGLISH = "a"
_LANGUAGES = (*ESPEAK_VOICES, "j", "z")


@dataclass(frozen=True)
class SpokenChunk:
    """One chunk's audio, as the speech engine reads a generation result."""

    audio: mx.array
    sample_rate: int
    token_count: int  # phonemes spoken
    phonemes: str


class KokoroSpeaker:
    """One loaded Kokoro checkpoint: its voices, the languages it can read, and speech."""

    def __init__(self, model: Any, path: Path) -> None:
        self.model = model
        self.path = path
        names = sorted(p.stem for p in (path / "voices").glob("*.safetensors"))
        if not names:
            raise ValueError(f"{path} has no voice packs (voices/*.safetensors)")
        self.g2p: dict[str, G2P] = {}
        missing = []
        for code in _LANGUAGES:
            try:
                self.g2p[code] = load_g2p(code)
            except ImportError as exc:
                missing.append(f"{code} ({exc})")
        if not self.g2p:
            raise ValueError(f"no language's G2P loads: pip install {ESPEAK_NEEDS}")
        if missing:
            log.info("Kokoro languages left out, their G2P does not load: %s", "; ".join(missing))
        self.default_voice = _default_voice(path, names, self.g2p)
        spoken = sorted(names, key=lambda n: (n != self.default_voice, n[:1] not in self.g2p, n))
        self.voices = [{"name": name, "language": name[:1]} for name in spoken]
        self._packs: dict[str, mx.array] = {}
        kokoro_weights.install()
        self.fast = kokoro_fast.install()
        if self.fast:
            kokoro_fast.to_side_stream(model.decoder.generator)

    def languages(self) -> list[str]:
        codes = sorted(self.g2p)
        return codes + sorted(alias for alias, code in ALIASES.items() if code in codes)

    def language_for(self, voice: str, language: str | None) -> str:
        """The code a request is read in: its `language`, else the voice's own language when
        its G2P loads here, else English."""
        if language:
            code = language_code(language)
            if code not in self.g2p:
                listed = ", ".join(self.languages())
                raise bad_request(
                    f"language {language!r} cannot be read by this Kokoro server; "
                    f"its languages: {listed}"
                )
            return code
        return voice[:1] if voice[:1] in self.g2p else ENGLISH

    def phoneme_chunks(self, text: str, code: str) -> list[str]:
        """What `text` is spoken as, chunk by chunk; a bad_request when it has nothing that
        can be spoken."""
        g2p = self.g2p[code]
        spoken = [chunk for chunk in chunks(g2p(text)) if self._speakable(chunk)]
        if not spoken:
            raise bad_request(
                f"input has nothing Kokoro can speak: its G2P ({g2p.label}) gives no phonemes "
                "for it"
            )
        return spoken

    def pack(self, voice: str) -> mx.array:
        if voice not in self._packs:
            loaded = mx.load(str(self.path / "voices" / f"{voice}.safetensors"))
            assert isinstance(loaded, dict)
            self._packs[voice] = loaded["voice"]
        return self._packs[voice]

    def generate(
        self, text: str, voice: str, speed: float, lang_code: str
    ) -> Iterator[SpokenChunk]:
        """Speech for `text`, a chunk at a time; the phonemes are made here, so that input
        with nothing to speak is refused before the generation starts."""
        return self._speak(self.phoneme_chunks(text, lang_code), self.pack(voice), speed)

    def _speak(self, pieces: list[str], pack: mx.array, speed: float) -> Iterator[SpokenChunk]:
        rate = int(self.model.sample_rate)
        for phonemes in pieces:
            output = self.model(phonemes, pack[len(phonemes) - 1], speed, return_output=True)
            yield SpokenChunk(output.audio[0], rate, len(phonemes), phonemes)

    def _speakable(self, phonemes: str) -> bool:
        vocab = self.model.vocab
        return any(p in vocab and not p.isspace() for p in phonemes)


def _default_voice(path: Path, names: list[str], g2p: dict[str, G2P]) -> str:
    """config.json's `default_voice` (written by the converter: the best of the voices), else
    mlx-audio's default when there, else the first voice whose language is read here."""
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    named = config.get("default_voice")
    if isinstance(named, str) and named in names:
        return named
    if MLX_AUDIO_DEFAULT_VOICE in names:
        return MLX_AUDIO_DEFAULT_VOICE
    return next((n for n in names if n[:1] in g2p), names[0])
