"""multipart/form-data bodies for `POST /v1/audio/speech` and `POST /v1/audio/voices`.

A speech form carries the JSON body's fields as text parts (numbers and booleans as their
text) and the reference audio as a file part, `ref_audio` (or `voice_audio`, the same), so a
clip can be uploaded as it is instead of base64 inside JSON. `speech_body` turns such a form
into the dict `gateway.audio.speech.request.parse_speech` reads, plus the uploaded bytes; every
field then meets the same checks as in JSON. `voice_upload` reads a saved-voice form
(OpenAI's custom-voice fields: `name`, `audio_sample`, and this server's `transcript`).
The body was read under the upload limit before any of this runs (gateway/http/multipart.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.audio.speech.request import SPEECH
from gateway.http.errors import invalid, unknown_field, unsupported
from gateway.http.multipart import Form, form_value
from gateway.schema import field as s
from gateway.schema.request import RequestSchema

REF_AUDIO_FILES = ("ref_audio", "voice_audio")
# Text parts are read as the JSON field's type says (gateway/audio/speech/request.SPEECH).
_TYPES = {name: field.schema.get("type") for name, field in SPEECH.fields.items()}


def is_form(content_type: str) -> bool:
    return content_type.lower().startswith("multipart/form-data")


def speech_body(form: Form) -> tuple[dict[str, object], bytes | None]:
    """A speech form as (JSON-like body, uploaded reference audio or None)."""
    body: dict[str, object] = {}
    for name, values in form.fields.items():
        if name not in SPEECH:
            raise unknown_field(name)
        if len(values) > 1:
            raise invalid(name, f"`{name}` was given {len(values)} times")
        body[name] = form_value(name, values[0], _TYPES.get(name))
    uploads = []
    for name, files in form.files.items():
        if name not in REF_AUDIO_FILES:
            raise unknown_field(name)
        uploads.extend(files)
    if len(uploads) > 1:
        raise invalid("ref_audio", "send one reference audio file")
    if uploads and "ref_audio" in body:
        raise invalid("ref_audio", "send the reference audio once (a file or base64)")
    return body, (uploads[0].data if uploads else None)


@dataclass(frozen=True, slots=True)
class VoiceUpload:
    name: str
    audio: bytes
    transcript: str | None


VOICE = RequestSchema(
    {
        "name": s.string("The voice's name: `voice` in speech requests.", minLength=1),
        "audio_sample": s.structure(
            {"type": "string", "contentMediaType": "application/octet-stream"},
            "The voice's audio file (a few seconds of clean speech).",
        ),
        "transcript": s.string("What the sample says (better clones; else the model's own)."),
        "type": s.limited(
            s.string(enum=("audio_sample",)), lambda b, n: None, "Only audio_sample."
        ),
        "consent": s.accepted(s.string(), "No consent recordings are kept here."),
    },
    required=("name", "audio_sample"),
)


def voice_upload(form: Form) -> VoiceUpload:
    """A `POST /v1/audio/voices` form; a 400 naming the field that is wrong or missing.

    `consent` (OpenAI's consent-recording id) is accepted so OpenAI clients work unchanged;
    this server keeps no consent recordings and the field changes no audio. `type` may only
    be `audio_sample`: voices designed from a text prompt are not available.
    """
    for name in form.names():
        if name not in VOICE:
            raise unknown_field(name)
    for name, values in form.fields.items():
        if len(values) > 1:
            raise invalid(name, f"`{name}` was given {len(values)} times")
    kind = form.fields.get("type", ["audio_sample"])[0]
    if kind == "prompt":
        raise unsupported("type", "voices designed from a prompt")
    if kind != "audio_sample":
        raise invalid("type", "`type` must be audio_sample")
    name = form.fields.get("name", [""])[0]
    if not name.strip():
        raise invalid("name", "`name` is required")
    files = form.files.get("audio_sample", [])
    if not files:
        raise invalid("audio_sample", "`audio_sample` is required: the voice's audio file")
    if len(files) > 1:
        raise invalid("audio_sample", "send one `audio_sample`")
    transcript = form.fields.get("transcript", [None])[0]
    if transcript is not None and not transcript.strip():
        raise invalid("transcript", "`transcript` is empty: omit it or send what is said")
    return VoiceUpload(name, files[0].data, transcript)
