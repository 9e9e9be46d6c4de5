"""Which voice a speech request means: a preset, a saved voice, or reference audio it carries.

A saved voice (gateway/audio/speech/voice_store.py) is named by OpenAI's voice object `{"id": "voice_..."}`
or by its name as a plain `voice` string. A model's preset of the same name wins over a saved
voice, so a saved voice never hides a preset. The chosen saved voice becomes the request's
`ref_audio` + `ref_text`: the worker then sees exactly what a client that sent that audio and
transcript itself would have sent, and clones the same voice.

A name that is neither a preset nor a saved voice may be an alias (OpenAI's `alloy`, ...,
or a `--voice-alias`; gateway/audio/speech/voice_aliases.py): the request then names the preset
it stands for (or none, on a model without presets). So a preset wins over a saved voice, and
a saved voice over an alias.

Cloning on a model that cannot is refused here, naming the model, before the worker is asked;
so are a voice the model does not have (naming `voice`, listing its voices) and, on a model
that speaks only voices described in words (a description, no presets, no cloning: Qwen3-TTS
VoiceDesign), a request without `instructions`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from msgspec.structs import replace

from gateway.audio.speech.request import SpeechCall
from gateway.audio.speech.voice_aliases import VoiceAlias
from gateway.audio.speech.voice_store import SavedVoice, VoiceStore
from gateway.http.errors import APIError, invalid
from protocol.inputs import SpeechInputs
from protocol.ready import SpeechInfo


def resolve(
    call: SpeechCall,
    audio: SpeechInfo,
    store: VoiceStore,
    aliases: Mapping[str, VoiceAlias] | None = None,
) -> SpeechCall:
    """`call` with a saved voice replaced by its reference audio and an alias by its preset
    (`aliases` by casefolded name); 400s as described above."""
    saved = _saved_voice(call, audio, store)
    inputs = call.inputs
    if saved is None and aliases:
        inputs = _aliased(inputs, audio, aliases)
    if saved is not None:
        if inputs.ref_audio is not None:
            raise invalid("voice", "send either a saved `voice` or `ref_audio`, not both")
        inputs = replace(inputs, voice=None, ref_audio=saved.audio, ref_text=saved.transcript)
    if inputs.ref_audio is not None and not audio.cloning:
        param = "voice" if saved is not None else "ref_audio"
        raise invalid(
            param,
            f"The model `{audio.model}` cannot clone a voice from reference audio "
            "(GET /v1/audio/voices shows `cloning`); use one of its preset voices",
            code="cloning_not_supported",
        )
    inputs = _checked_voice(inputs, audio)
    if saved is not None and saved.transcript is not None and not audio.ref_text:
        # The model clones from the audio alone; sending the transcript would be refused.
        inputs = replace(inputs, ref_text=None)
    return dataclasses.replace(call, inputs=inputs)


def _checked_voice(inputs: SpeechInputs, audio: SpeechInfo) -> SpeechInputs:
    """`inputs` with its voice spelled as the model's preset (names match in any case), or a
    400 naming `voice` / `instructions` (see the module docstring)."""
    presets = {v.name.casefold(): v.name for v in audio.voices}
    if inputs.voice is not None:
        preset = presets.get(inputs.voice.casefold())
        if preset is None:
            listed = ", ".join(presets.values()) or "none"
            ways = [w for w, can in (("clone one with ref_audio", audio.cloning),
                                     ("describe one in instructions", audio.descriptions)) if can]  # fmt: skip
            hint = f" ({'; '.join(ways)})" if ways and not presets else ""
            raise invalid(
                "voice", f"unknown voice {inputs.voice!r}; this model's voices: {listed}{hint}"
            )
        inputs = replace(inputs, voice=preset)
    if (
        described_only(audio)
        and inputs.ref_audio is None
        and not (inputs.instructions or "").strip()
    ):
        raise invalid(
            "instructions",
            f"The model `{audio.model}` speaks only a voice described in `instructions` "
            "(e.g. 'A calm, low voice'): send one",
        )
    return inputs


def described_only(audio: SpeechInfo) -> bool:
    """A model that speaks only voices described in words (no presets, no cloning)."""
    return audio.descriptions and not audio.voices and not audio.cloning


def described_voice_error(audio: SpeechInfo, param: str, where: str) -> APIError:
    """The 400 for `where` (chat audio output, a Realtime session), which cannot describe a
    voice, on a model that speaks only described voices."""
    return invalid(
        param,
        f"The speech model `{audio.model}` speaks only a voice described in words, which "
        f"{where} cannot send: use /v1/audio/speech (or its WebSocket) with `instructions`",
    )


def _aliased(
    inputs: SpeechInputs, audio: SpeechInfo, aliases: Mapping[str, VoiceAlias]
) -> SpeechInputs:
    name = inputs.voice
    if name is None or name.casefold() in {v.name.casefold() for v in audio.voices}:
        return inputs
    alias = aliases.get(name.casefold())
    if alias is None:
        return inputs  # an unknown voice: refused by _checked_voice, listing the voices
    if alias.error is not None:
        raise invalid("voice", alias.error, code="voice_alias_invalid")
    return replace(inputs, voice=alias.voice)


def _saved_voice(call: SpeechCall, audio: SpeechInfo, store: VoiceStore) -> SavedVoice | None:
    name = call.inputs.voice
    if name is None:
        return None
    if call.voice_by_id and store.get(name) is not None:
        return store.get(name)
    presets = {v.name.casefold() for v in audio.voices}
    if name.casefold() in presets:
        return None
    return store.by_name(name)
