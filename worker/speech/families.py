"""What the speech engine knows about each mlx-audio TTS family it serves.

A `Family` answers, for one loaded model: its preset voices, whether it clones a voice from
reference audio or designs one from a text description, which languages it takes, whether
`speed` and `instructions` mean anything to it, and how a request maps onto that family's
`model.generate(...)` keyword arguments. Everything the engine validates comes from here, so a
request a family cannot honour is refused with a message naming the field instead of being
silently ignored.

`FAMILIES` is the supported list; a checkpoint of any other mlx-audio family fails at load
with a message that names these. All five are exercised by the test suite on tiny checkpoints
built offline (kokoro where misaki's espeak-ng G2P is installed).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.runtime.errors import bad_request

log = logging.getLogger(__name__)

DEFAULT_VOICE = "default"  # the one "preset" of a single-voice family


@dataclass(frozen=True)
class SpeechRequest:
    """A speech Submit's inputs, validated for types (see TtsEngine.admit for the rest)."""

    text: str
    voice: str | None = None
    ref_audio: Any = None  # decoded reference audio (mx.array at the model's rate) or None
    ref_text: str | None = None
    instructions: str | None = None
    language: str | None = None
    speed: float | None = None
    seed: int | None = None


def _none(model: Any) -> bool:
    return False


@dataclass(frozen=True)
class Family:
    """How the engine drives one mlx-audio TTS family."""

    name: str  # mlx-audio's module name under mlx_audio.tts.models
    label: str  # for people
    voices: Callable[[Any, Path], list[dict[str, Any]]]
    cloning: Callable[[Any], bool]
    descriptions: Callable[[Any], bool]  # a voice designed from `instructions`
    instructions: Callable[[Any], bool]  # style / emotion or description text is used
    languages: Callable[[Any], list[str]]  # [] when the family takes no language
    speed: bool
    streams: bool  # yields audio every few frames (else: once per text segment)
    kwargs: Callable[[Any, SpeechRequest, dict[str, Any]], dict[str, Any]]
    # ref_text (the reference audio's transcript) changes the cloned voice; where it does
    # not, a request that sends one is refused rather than silently ignored.
    takes_ref_text: Callable[[Any], bool] = _none
    voice_required: bool = False  # a request must name a preset or bring reference audio
    passes_voice: bool = False  # the preset name goes to generate(voice=...)
    default_first_voice: bool = False  # no voice named: the first preset (CustomVoice needs one)
    # Readies a loaded model: loads what mlx-audio would otherwise load on the first request
    # (MOSS-TTS-Nano's codec), so that a checkpoint missing a part fails at start, not in a
    # client's request; builds the server's own parts (Kokoro's front end); gives a decoder
    # its faster CPU forms (Qwen3-TTS's codec).
    prepare: Callable[[Any], None] = lambda model: None
    # The generation a request's kwargs drive: mlx-audio's `model.generate(**kwargs)`, except
    # for Kokoro (the server's own text front end: worker/speech/kokoro_speaker.py).
    generate: Callable[[Any, dict[str, Any]], Any] = lambda model, kwargs: model.generate(**kwargs)


def _no_languages(model: Any) -> list[str]:
    return []


def _single_voice(model: Any, path: Path) -> list[dict[str, Any]]:
    return [{"name": DEFAULT_VOICE, "language": None}]


# -- Qwen3-TTS: CustomVoice (presets + style), VoiceDesign (description), Base (cloning) ----


def _qwen3_type(model: Any) -> str:
    return getattr(model.config, "tts_model_type", "base")


def _qwen3_voices(model: Any, path: Path) -> list[dict[str, Any]]:
    dialects = model.config.talker_config.spk_is_dialect or {}
    return [
        {"name": name, "language": dialects.get(name) or None}
        for name in model.get_supported_speakers()
    ]


def _qwen3_cloning(model: Any) -> bool:
    # Base models clone from the speaker embedding of ref_audio; with the codec's encoder
    # (speech_tokenizer) and ref_text, mlx-audio clones in context instead.
    return _qwen3_type(model) == "base" and getattr(model, "speaker_encoder", None) is not None


def _qwen3_in_context(model: Any) -> bool:
    # mlx-audio clones in context (reference codes + transcript) only when the codec has its
    # encoder; without it, ref_text would be dropped, so it is refused instead.
    codec = getattr(model, "speech_tokenizer", None)
    return _qwen3_cloning(model) and bool(getattr(codec, "has_encoder", False))


def _qwen3_kwargs(model: Any, req: SpeechRequest, options: dict[str, Any]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "text": req.text,
        "lang_code": req.language or "auto",
        "stream": True,
        "streaming_interval": options["streaming_interval"],
    }
    if req.voice is not None:
        kwargs["voice"] = req.voice
    if req.instructions:
        kwargs["instruct"] = req.instructions
    if req.ref_audio is not None:
        kwargs["ref_audio"] = req.ref_audio
        kwargs["ref_text"] = req.ref_text
    if options.get("max_tokens") is not None:  # generation_config.json's cap, as mlx-audio's
        kwargs["max_tokens"] = options["max_tokens"]
    return kwargs


def _qwen3_prepare(model: Any) -> None:
    # The codec's decoder in faster forms where MLX runs on the CPU (a no-op elsewhere); the
    # code predictor's step compiled.
    from worker.speech import qwen3_codec_fast, qwen3_compiled
    from worker.speech.staged import unwrap_decoder

    qwen3_codec_fast.install(unwrap_decoder(model.speech_tokenizer.decoder))
    qwen3_compiled.install(model)


QWEN3_TTS = Family(
    name="qwen3_tts",
    label="Qwen3-TTS (CustomVoice, VoiceDesign, Base)",
    voices=_qwen3_voices,
    cloning=_qwen3_cloning,
    descriptions=lambda model: _qwen3_type(model) == "voice_design",
    instructions=lambda model: _qwen3_type(model) in ("custom_voice", "voice_design"),
    languages=lambda model: list(model.get_supported_languages()),
    speed=False,
    streams=True,
    kwargs=_qwen3_kwargs,
    takes_ref_text=_qwen3_in_context,
    passes_voice=True,
    default_first_voice=True,
    prepare=_qwen3_prepare,
)


# -- Soprano: one voice, English ----------------------------------------------------------


def _max_tokens_kwargs(model: Any, req: SpeechRequest, options: dict[str, Any]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"text": req.text}
    if options.get("max_tokens") is not None:
        kwargs["max_tokens"] = options["max_tokens"]
    return kwargs


SOPRANO = Family(
    name="soprano",
    label="Soprano",
    voices=_single_voice,
    cloning=_none,
    descriptions=_none,
    instructions=_none,
    languages=_no_languages,
    speed=False,
    streams=False,
    kwargs=_max_tokens_kwargs,
)


# -- Kokoro: voice packs in voices/ (a voice's language: its name's first letter) ----------


def _speaker(model: Any) -> Any:
    speaker = getattr(model, "vomlx_speaker", None)
    if speaker is None:
        raise RuntimeError("the Kokoro model was not prepared (worker/speech/families.py)")
    return speaker


def _kokoro_prepare(model: Any) -> None:
    # The server's own front end (worker/speech/kokoro_speaker.py): G2P for every language
    # that loads here, the voice packs; a plain attribute (not part of the module's tree).
    from worker.speech.kokoro_speaker import KokoroSpeaker

    model.vomlx_speaker = KokoroSpeaker(model, Path(model.config.model_path))


def _kokoro_voices(model: Any, path: Path) -> list[dict[str, Any]]:
    # The default voice first (a request naming none gets it), then voices whose language is
    # read here.
    return list(_speaker(model).voices)


def _kokoro_kwargs(model: Any, req: SpeechRequest, options: dict[str, Any]) -> dict[str, Any]:
    speaker = _speaker(model)
    voice = req.voice or speaker.default_voice
    code = speaker.language_for(voice, req.language)
    return {"text": req.text, "voice": voice, "speed": req.speed or 1.0, "lang_code": code}


def _kokoro_generate(model: Any, kwargs: dict[str, Any]) -> Any:
    return _speaker(model).generate(**kwargs)


KOKORO = Family(
    name="kokoro",
    label="Kokoro",
    voices=_kokoro_voices,
    cloning=_none,
    descriptions=_none,
    instructions=_none,
    languages=lambda model: _speaker(model).languages(),
    speed=True,
    streams=False,
    kwargs=_kokoro_kwargs,
    generate=_kokoro_generate,
    passes_voice=True,
    default_first_voice=True,
    prepare=_kokoro_prepare,
)


# -- VoxCPM2 and MOSS-TTS-Nano: no presets; a voice is cloned (or, VoxCPM2, described) -------


def _cloning_kwargs(model: Any, req: SpeechRequest, options: dict[str, Any]) -> dict[str, Any]:
    kwargs = _max_tokens_kwargs(model, req, options)
    if req.ref_audio is not None:
        kwargs["ref_audio"] = req.ref_audio  # both clone from the audio alone
    if req.instructions:
        kwargs["instruct"] = req.instructions
    return kwargs


VOXCPM2 = Family(
    name="voxcpm2",
    label="VoxCPM2",
    voices=lambda model, path: [],
    cloning=lambda model: True,
    descriptions=lambda model: True,
    instructions=lambda model: True,
    languages=_no_languages,
    speed=False,
    streams=False,
    kwargs=_cloning_kwargs,
)


def _moss_load_codec(model: Any) -> None:
    # mlx-audio loads the audio tokenizer (audio_tokenizer/ next to the weights) lazily and
    # falls back to downloading one; loading it here turns a missing codec into a start error.
    # Building it also draws from the global random generator, so loaded lazily the first
    # seeded request would differ from every later one with the same seed.
    model._ensure_audio_tokenizer()


MOSS_TTS_NANO = Family(
    name="moss_tts_nano",
    label="MOSS-TTS-Nano",
    voices=lambda model, path: [],
    cloning=lambda model: True,
    descriptions=_none,
    instructions=_none,
    languages=_no_languages,
    speed=False,
    streams=False,
    kwargs=_cloning_kwargs,
    voice_required=True,  # it only speaks in a cloned voice
    prepare=_moss_load_codec,
)

FAMILIES: dict[str, Family] = {
    f.name: f for f in (QWEN3_TTS, SOPRANO, KOKORO, VOXCPM2, MOSS_TTS_NANO)
}


def supported_families() -> str:
    return ", ".join(f"{f.name} ({f.label})" for f in FAMILIES.values())


def family_name(path: Path) -> str:
    """The mlx-audio TTS family a checkpoint directory belongs to, from its config.json."""
    from mlx_audio.registry import model_type_from_config
    from mlx_audio.tts.utils import MODEL_REMAPPING

    config_file = path / "config.json"
    if not config_file.is_file():
        raise ValueError(f"{path} has no config.json: not a TTS checkpoint directory")
    config = json.loads(config_file.read_text())
    model_type = model_type_from_config(config) or config.get("architecture")
    if model_type is None:
        raise ValueError(f"{config_file} names no model_type")
    return MODEL_REMAPPING.get(model_type, model_type)


def family_for(path: Path) -> Family:
    """The supported family of a checkpoint; ValueError naming the supported ones if not."""
    name = family_name(path)
    family = FAMILIES.get(name)
    if family is None:
        raise ValueError(
            f"{path}: TTS model family {name!r} is not supported; "
            f"supported families: {supported_families()}"
        )
    return family


def check_voice(family: Family, voices: list[dict[str, Any]], req: SpeechRequest) -> str | None:
    """The preset name to pass to `generate` (None: none), or a bad_request listing the voices."""
    names = {v["name"].lower(): v["name"] for v in voices}
    if req.voice is None:
        if family.voice_required and req.ref_audio is None:
            raise bad_request("this model speaks only in a cloned voice: send ref_audio")
        if family.default_first_voice and req.ref_audio is None and voices:
            return voices[0]["name"]
        return None
    if req.voice.lower() not in names:
        listed = ", ".join(v["name"] for v in voices) or "none (clone one with ref_audio)"
        raise bad_request(f"unknown voice {req.voice!r}; this model's voices: {listed}")
    if req.ref_audio is not None:
        raise bad_request("send either a preset voice or ref_audio, not both")
    return names[req.voice.lower()] if family.passes_voice else None
