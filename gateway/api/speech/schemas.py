"""The response schemas of `/v1/audio/speech` and `/v1/audio/voices` (for /openapi.json)."""

from __future__ import annotations

from gateway.schema.builders import (
    BOOLEAN,
    COUNT,
    INTEGER,
    STRING,
    Schema,
    _all,
    _array,
    _const,
    _doc,
    _event,
    _obj,
    _or_null,
    _ref,
)
from gateway.schema.error_bodies import OPENAI_ERROR

SCHEMAS: dict[str, Schema] = {
    # -- speech
    "SpeechStreamEvent": {
        "oneOf": [
            _event("speech.audio.delta", {"audio": _doc(STRING, "Base64 of encoded audio.")}),
            _event(
                "speech.audio.done",
                {
                    "usage": _all(
                        {"input_tokens": INTEGER, "output_tokens": INTEGER, "total_tokens": INTEGER}
                    )
                },
            ),
            _event("error", {"error": OPENAI_ERROR}, "A failure after the stream started."),
        ]
    },
    "PresetVoice": _all(
        {"name": STRING, "language": _or_null(STRING), "type": _const("preset")},
        "One of the model's own voices.",
    ),
    "AudioVoice": _all(
        {
            "id": STRING,
            "object": _const("audio.voice"),
            "type": _const("audio_sample"),
            "name": STRING,
            "created_at": INTEGER,
            "transcript": _or_null(STRING),
            "bytes": _doc(COUNT, "The reference audio's size."),
        },
        "A saved voice: reference audio to clone, kept in the gateway's memory.",
    ),
    "VoiceList": _all(
        {
            "object": _const("list"),
            "model": _doc(STRING, "The speech model."),
            "voices": _array({"anyOf": [_ref("PresetVoice"), _ref("AudioVoice")]}),
            "aliases": _array(
                _obj(
                    {
                        "name": STRING,
                        "voice": _doc(
                            _or_null(STRING),
                            "The preset it stands for; null: the model's default voice.",
                        ),
                        "source": _doc(STRING, "`default` or `--voice-alias`."),
                        "error": _doc(STRING, "Why an override cannot be used."),
                    },
                    ["name", "voice", "source"],
                ),
                "OpenAI's voice names (and --voice-alias ones) and the preset each speaks with.",
            ),
            "cloning": BOOLEAN,
            "ref_text": BOOLEAN,
            "descriptions": BOOLEAN,
            "instructions": BOOLEAN,
            "languages": _array(STRING),
            "speed": BOOLEAN,
            "sample_rate": INTEGER,
            "response_formats": _array(STRING, "The formats this server can encode."),
        }
    ),
    "AudioVoiceDeleted": _all(
        {"id": STRING, "object": _const("audio.voice.deleted"), "deleted": _const(True)}
    ),
}
