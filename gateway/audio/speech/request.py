"""`POST /v1/audio/speech` bodies -> what the worker's speech engine takes, or a 400 naming
the field.

OpenAI's fields (`model`, `input`, `voice`, `instructions`, `response_format`, `speed`,
`stream_format`) plus the extensions vLLM-Omni's speech API uses (`language`, `ref_audio` +
`ref_text` for a cloned voice, `stream`, `seed`). The same fields come as JSON or, with the
reference audio as a file part, as multipart/form-data (gateway/api/speech/form.py turns a form
into the body read here); a saved voice (`voice: {"id": ...}` or its name) is resolved by
gateway/audio/speech/voices.py, which also refuses a voice that is not one of the model's
presets. What only the model can judge (does it take instructions, clone, know the language)
the worker checks and answers with a 400 that says so. `stream` and `stream_format` pick the response:

    no stream, stream_format absent or "audio"  -> the whole file, once generated
    stream: true (stream_format absent/"audio") -> the file's bytes as they are encoded
    stream_format: "sse"                         -> OpenAI's speech SSE events (base64 deltas)
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from gateway.audio.speech.encoding import FORMATS, unsupported_reason
from gateway.http.errors import invalid
from gateway.schema import field as s
from gateway.schema.readers import boolean, integer, number, string
from gateway.schema.request import RequestSchema
from protocol.inputs import SpeechInputs

MAX_INPUT_CHARS = 4096  # OpenAI's limit
MAX_REF_AUDIO_BYTES = 10 * 1024 * 1024
DEFAULT_FORMAT = "mp3"  # OpenAI's default
STREAM_FORMATS = ("audio", "sse")
SEED_RANGE = (0, 2**63 - 1)
SPEEDS = (0.25, 4.0)
SPEECH = RequestSchema(
    {
        "model": s.string("The served TTS model's id or an alias (e.g. tts-1).", minLength=1),
        "input": s.string(f"The text to speak, at most {MAX_INPUT_CHARS} characters.", minLength=1),
        "voice": s.structure(
            {
                "anyOf": [
                    {"type": "string"},
                    {
                        "type": "object",
                        "required": ["id"],
                        "properties": {"id": {"type": "string"}},
                    },
                ]
            },
            "A preset voice, a saved voice's name or id, or OpenAI's {id} object.",
        ),
        "instructions": s.string("How to speak, for models that take instructions."),
        "response_format": s.structure(
            {"type": "string", "enum": list(FORMATS)},
            "mp3 (default), opus, aac, flac, wav or pcm (what the model's sample rate allows).",
        ),
        "speed": s.number("Speaking rate.", *SPEEDS),
        "stream": s.boolean("The file's bytes as they are encoded."),
        "stream_format": s.structure(
            {"type": "string", "enum": list(STREAM_FORMATS)}, "sse: OpenAI's speech events."
        ),
        "language": s.string("Extension: the language to speak in."),
        "ref_audio": s.string("Extension: a clip to clone (base64 or a data: URL)."),
        "ref_text": s.string("Extension: the transcript of ref_audio."),
        "seed": s.integer("Extension: same seed, same audio.", *SEED_RANGE),
    },
    required=("model", "input"),
)


@dataclass(frozen=True)
class SpeechCall:
    model: str
    response_format: str
    mode: str  # "file" (buffered), "audio" (streamed bytes) or "sse"
    inputs: SpeechInputs
    voice_by_id: bool = False  # `voice` came as {"id": ...}: a saved voice's id first


def parse_speech(
    body: dict[str, Any], sample_rate: int, uploaded_ref_audio: bytes | None = None
) -> SpeechCall:
    """Validate a speech body for a model that speaks at `sample_rate` Hz; `uploaded_ref_audio`
    is a multipart request's reference audio file (then `ref_audio` may not be in `body`)."""
    SPEECH.check(body)
    model = string(body, "model")
    assert model is not None  # required by the table
    text = string(body, "input")
    if text is None or not text.strip():
        raise invalid("input", "`input` must be a non-empty string")
    if len(text) > MAX_INPUT_CHARS:
        raise invalid(
            "input", f"`input` is {len(text)} characters long; the limit is {MAX_INPUT_CHARS}"
        )
    fmt = string(body, "response_format") or DEFAULT_FORMAT
    why = unsupported_reason(fmt, sample_rate)
    if why is not None:
        raise invalid("response_format", f"`response_format` {fmt!r}: {why}")
    ref_audio = _reference_audio(body.get("ref_audio"))
    if uploaded_ref_audio is not None:
        if ref_audio is not None:
            raise invalid("ref_audio", "send the reference audio once (a file or base64)")
        ref_audio = _checked_upload(uploaded_ref_audio)
    ref_text = string(body, "ref_text")
    if ref_text is not None and not ref_text.strip():
        raise invalid("ref_text", "`ref_text` is empty: send the reference audio's transcript")
    voice, by_id = _voice(body.get("voice"))
    if ref_text is not None and ref_audio is None:  # a saved voice brings its own
        raise invalid("ref_text", "`ref_text` is the transcript of `ref_audio`: send both")
    inputs = SpeechInputs(
        input=text,
        voice=voice,
        ref_audio=ref_audio,
        ref_text=ref_text,
        instructions=string(body, "instructions"),
        language=string(body, "language"),
        speed=number(body, "speed", *SPEEDS),
        seed=integer(body, "seed", *SEED_RANGE),
    )
    return SpeechCall(model, fmt, _mode(body), inputs, voice_by_id=by_id)


def _mode(body: dict[str, Any]) -> str:
    stream = boolean(body, "stream")
    stream_format = string(body, "stream_format")
    if stream_format is not None and stream_format not in STREAM_FORMATS:
        raise invalid(
            "stream_format", f"`stream_format` must be one of: {', '.join(STREAM_FORMATS)}"
        )
    if stream_format == "sse":
        if stream is False:
            raise invalid("stream", '`stream_format` "sse" streams: it cannot go with stream false')
        return "sse"
    return "audio" if stream else "file"


def _voice(value: Any) -> tuple[str | None, bool]:
    """The voice's name or id, and whether it came as OpenAI's voice object {"id": ...}."""
    if isinstance(value, dict) and set(value) == {"id"} and isinstance(value["id"], str):
        return value["id"] or None, True
    if value is None or isinstance(value, str):
        return value or None, False
    raise invalid("voice", '`voice` must be a voice name (string) or {"id": voice id}')


def _checked_upload(data: bytes) -> bytes:
    if not data:
        raise invalid("ref_audio", "`ref_audio` is empty: the upload holds no audio")
    if len(data) > MAX_REF_AUDIO_BYTES:
        raise invalid("ref_audio", f"`ref_audio` exceeds {MAX_REF_AUDIO_BYTES} bytes")
    return data


def _reference_audio(value: Any) -> bytes | None:
    """`ref_audio`: base64, or a `data:audio/...;base64,` URL, of an audio file."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise invalid("ref_audio", "`ref_audio` must be a base64 string or a data: URL")
    if value.startswith("data:"):
        head, sep, value = value.partition(",")
        if not sep or not head.endswith(";base64"):
            raise invalid("ref_audio", "`ref_audio` data: URLs must be base64 encoded")
    if len(value) > MAX_REF_AUDIO_BYTES * 4 // 3 + 4:
        raise invalid("ref_audio", f"`ref_audio` exceeds {MAX_REF_AUDIO_BYTES} bytes")
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise invalid("ref_audio", "`ref_audio` is not valid base64") from None
    if not data:
        raise invalid("ref_audio", "`ref_audio` is empty")
    return data
