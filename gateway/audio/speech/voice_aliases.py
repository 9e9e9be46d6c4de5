"""OpenAI's voice names on any TTS model: a default table, and `--voice-alias` overrides.

Clients written for OpenAI send `voice: "alloy"` and the like. On a model without a preset of
that name, each of `OPENAI_VOICES` stands for one of the model's own presets (the worker's
`SpeechInfo.voices`, in their order), chosen deterministically:

1. a preset whose name ends in `_<name>` (Kokoro's `af_alloy`, `am_echo`, `bm_fable`, `af_nova`,
   `am_onyx`), the first in the model's order;
2. else a preset of the same kind of voice, where the family's presets are known: OpenAI's
   `alloy`, `coral`, `nova`, `sage`, `shimmer`, `marin` are female voices, the others male;
   Kokoro says it in the name (`af_...` female, `am_...` male), Qwen3-TTS presets are in
   `QWEN3_TTS_FEMALE` / `QWEN3_TTS_MALE`. The k-th OpenAI name of a kind takes the
   (k mod n)-th of the model's n presets of that kind;
3. else the model's presets in order: the k-th OpenAI name takes the (k mod n)-th preset;
4. a model without presets (VoxCPM2, MOSS-TTS-Nano) speaks as if no voice were named.

`--voice-alias NAME=VOICE` sets NAME (one of OpenAI's names, or any other) to VOICE, which must
be one of the model's presets; one that is not makes every request using NAME a 400 naming the
option (the gateway learns the model's voices only when its worker is ready, so this cannot be
checked at start). A preset's own name always wins: an alias of that name is not used. A saved
voice (gateway/audio/speech/voice_store.py) of the same name also wins over an alias.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from protocol.ready import SpeechInfo

log = logging.getLogger(__name__)

OPENAI_VOICES = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer",
    "verse", "marin", "cedar",
)  # fmt: skip
FEMALE = frozenset({"alloy", "coral", "nova", "sage", "shimmer", "marin"})
QWEN3_TTS_FEMALE = frozenset({"vivian", "serena", "ono_anna", "sohee"})
QWEN3_TTS_MALE = frozenset({"uncle_fu", "dylan", "eric", "ryan", "aiden"})
DEFAULT, OPTION = "default", "--voice-alias"


@dataclass(frozen=True, slots=True)
class VoiceAlias:
    name: str
    voice: str | None  # the preset it stands for; None: the model's own default voice
    source: str  # DEFAULT (the table above) or OPTION
    error: str | None = None  # an override naming no preset of the model

    def public(self) -> dict[str, Any]:
        body: dict[str, Any] = {"name": self.name, "voice": self.voice, "source": self.source}
        if self.error is not None:
            body["error"] = self.error
        return body


def alias_table(audio: SpeechInfo, overrides: Sequence[tuple[str, str]]) -> dict[str, VoiceAlias]:
    """Every alias of `audio`'s model, keyed by its casefolded name, OpenAI's names first."""
    presets = {v.name.casefold(): v.name for v in audio.voices}
    table = {
        name: VoiceAlias(name, default_voice(name, audio), DEFAULT)
        for name in OPENAI_VOICES
        if name not in presets
    }
    for name, voice in overrides:
        key = name.casefold()
        if key in presets:
            continue  # the model's own voice wins
        target = presets.get(voice.casefold())
        error = None
        if target is None:
            listed = ", ".join(v.name for v in audio.voices) or "none"
            error = (
                f"--voice-alias {name}={voice}: `{voice}` is not a voice of the model "
                f"`{audio.model}` (its voices: {listed})"
            )
        table[key] = VoiceAlias(name, target or voice, OPTION, error)
    return table


def default_voice(name: str, audio: SpeechInfo) -> str | None:
    """The preset OpenAI's voice `name` stands for by default (see the module docstring)."""
    voices = [v.name for v in audio.voices]
    if not voices:
        return None
    suffix = "_" + name
    named = [v for v in voices if v.casefold().endswith(suffix)]
    if named:
        return named[0]
    female = name in FEMALE
    same = [v for v in voices if _is_female(audio.family, v) is female]
    if same:
        kind = [n for n in OPENAI_VOICES if (n in FEMALE) is female]
        return same[kind.index(name) % len(same)]
    return voices[OPENAI_VOICES.index(name) % len(voices)]


def _is_female(family: str, voice: str) -> bool | None:
    """Whether a preset is a female voice; None when the family does not say."""
    name = voice.casefold()
    if family == "kokoro" and len(name) > 3 and name[2] == "_" and name[1] in "fm":
        return name[1] == "f"
    if family == "qwen3_tts":
        if name in QWEN3_TTS_FEMALE:
            return True
        if name in QWEN3_TTS_MALE:
            return False
    return None


class AliasCache:
    """The table of the current speech model, rebuilt when its Ready section changes; an
    override naming no preset is logged once per table."""

    def __init__(self, overrides: Sequence[tuple[str, str]]) -> None:
        self.overrides = tuple(overrides)
        self._audio: SpeechInfo | None = None
        self._table: dict[str, VoiceAlias] = {}

    def table(self, audio: SpeechInfo) -> dict[str, VoiceAlias]:
        if audio != self._audio:
            self._table = alias_table(audio, self.overrides)
            self._audio = audio
            for alias in self._table.values():
                if alias.error is not None:
                    log.warning("%s: requests for voice %r are refused", alias.error, alias.name)
        return self._table
