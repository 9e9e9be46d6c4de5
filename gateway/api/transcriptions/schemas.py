"""The response schemas of `/v1/audio/transcriptions` and `/v1/audio/translations` (for
/openapi.json)."""

from __future__ import annotations

from gateway.schema.builders import (
    INTEGER,
    NUMBER,
    STRING,
    Schema,
    _all,
    _array,
    _const,
    _doc,
    _enum,
    _event,
    _obj,
    _ref,
)

_TRANSCRIPTION_TOKENS = _all(
    {
        "type": _const("tokens"),
        "input_tokens": _doc(INTEGER, "Seconds of audio, rounded up."),
        "input_token_details": _all({"audio_tokens": INTEGER, "text_tokens": INTEGER}),
        "output_tokens": INTEGER,
        "total_tokens": INTEGER,
    }
)

SCHEMAS: dict[str, Schema] = {
    "Transcription": _all({"text": STRING, "usage": _TRANSCRIPTION_TOKENS}),
    "TranscriptionSegment": _all(
        {
            "id": INTEGER,
            "seek": INTEGER,
            "start": NUMBER,
            "end": NUMBER,
            "text": STRING,
            "tokens": _array(INTEGER),
            "temperature": NUMBER,
            "avg_logprob": NUMBER,
            "compression_ratio": NUMBER,
            "no_speech_prob": NUMBER,
        }
    ),
    "TranscriptionVerbose": _obj(
        {
            "task": _enum("transcribe", "translate"),
            "language": _doc(STRING, "An English name (`english`)."),
            "duration": _doc(NUMBER, "Seconds."),
            "text": STRING,
            "segments": _array(_ref("TranscriptionSegment")),
            "words": _array(
                _all({"word": STRING, "start": NUMBER, "end": NUMBER}),
                "With `timestamp_granularities` `word`.",
            ),
            "usage": _all({"type": _const("duration"), "seconds": NUMBER}),
        },
        ["task", "language", "duration", "text", "segments", "usage"],
    ),
    "TranscriptionStreamEvent": {
        "anyOf": [
            _event("transcript.text.delta", {"delta": STRING}),
            _event("transcript.text.done", {"text": STRING, "usage": _TRANSCRIPTION_TOKENS}),
            _ref("ErrorResponse"),
        ]
    },
}
