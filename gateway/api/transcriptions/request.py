"""Parse OpenAI transcription / translation forms into what the speech-in engine takes.

Field policy, as for chat: every field is honoured, accepted at a value that changes nothing,
or refused with a 400 naming it; unknown fields are refused too. The openai SDK sends lists as
repeated `name[]` fields (`timestamp_granularities[]`), which count the same as `name`.

    file                      required; its bytes go to the worker as they are
    model                     required; checked by the route
    language                  transcriptions only; ISO-639-1 (the worker validates it)
    prompt                    context / initial prompt
    response_format           json (default), text, srt, verbose_json, vtt
    temperature               0..1; 0 or absent: Whisper's fallback ladder
    timestamp_granularities   segment (default) and/or word; needs verbose_json
    stream                    transcriptions only; with json or text
    include                   only []: logprobs are not available
    chunking_strategy         only "auto" (long audio is always cut into windows)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gateway.audio.transcription.formats import FORMATS
from gateway.http.errors import invalid, unknown_field, unsupported
from gateway.http.multipart import Form, UploadedFile
from gateway.schema import field as s
from gateway.schema.request import RequestSchema
from protocol.inputs import TranscribeInputs

TASK_TRANSCRIBE = "transcribe"
TASK_TRANSLATE = "translate"
_STREAM_FORMATS = ("json", "text")
_FILE = {"type": "string", "contentMediaType": "application/octet-stream"}
_SHARED = {
    "file": s.structure(_FILE, "The audio file (wav, mp3, flac, ogg, m4a, webm, ...)."),
    "model": s.string(
        "The served speech-recognition model's id or an alias (whisper-1).", minLength=1
    ),
    "prompt": s.string("Context: the initial prompt."),
    "response_format": s.string("json (default), text, srt, verbose_json or vtt.", FORMATS),
    "temperature": s.number("0 or absent: Whisper's fallback ladder.", 0, 1),
}
TRANSLATION = RequestSchema(_SHARED, required=("file", "model"))
TRANSCRIPTION = RequestSchema(
    {
        **_SHARED,
        "language": s.string("ISO-639-1; absent: detected."),
        "timestamp_granularities": s.array(
            "segment (default) and/or word; needs verbose_json.", {"enum": ["word", "segment"]}
        ),
        "stream": s.boolean(f"Server-sent events; with {' or '.join(_STREAM_FORMATS)}."),
        "include": s.limited(
            s.array(items={"type": "string"}), lambda b, n: None, "Only []: no logprobs."
        ),
        "chunking_strategy": s.limited(
            s.string(enum=("auto",)), lambda b, n: None, "Only auto: long audio is windowed."
        ),
        # Fields of OpenAI's newer models (diarization, keyword boosting) this server lacks.
        **dict.fromkeys(
            ("known_speaker_names", "known_speaker_references", "keywords", "languages"),
            s.refused(),
        ),
    },
    required=("file", "model"),
)
_TRUE, _FALSE = ("true", "1"), ("false", "0", "")


@dataclass(slots=True)
class TranscriptionRequest:
    task: str  # "transcribe" | "translate"
    model: str
    file: UploadedFile
    language: str | None
    prompt: str | None
    response_format: str
    temperature: float | None
    granularities: list[str]
    stream: bool

    @property
    def words(self) -> bool:
        return "word" in self.granularities

    def inputs(self) -> TranscribeInputs:
        return TranscribeInputs(
            audio=self.file.data,
            filename=self.file.filename,
            language=self.language,
            prompt=self.prompt,
            temperature=self.temperature,
            task=self.task,
            timestamps=list(self.granularities),
        )


def parse_transcription_form(form: Form, task: str) -> TranscriptionRequest:
    table = TRANSCRIPTION if task == TASK_TRANSCRIBE else TRANSLATION
    for name in form.names():
        key = name[:-2] if name.endswith("[]") else name
        if key not in TRANSCRIPTION:
            raise unknown_field(name)
        if key not in table:
            raise unsupported(key, "for translations")
        if table.fields[key].policy == "refused":
            raise unsupported(key)
    upload = _file(form)
    response_format = _text(form, "response_format") or "json"
    if response_format not in FORMATS:
        raise invalid("response_format", f"`response_format` must be one of {', '.join(FORMATS)}")
    granularities = _granularities(form, response_format)
    stream = _stream(form)
    if stream and response_format not in _STREAM_FORMATS:
        raise invalid(
            "stream", f"`stream` needs `response_format` json or text, not {response_format!r}"
        )
    _include(form)
    chunking = _text(form, "chunking_strategy")
    if chunking not in (None, "auto"):
        raise unsupported("chunking_strategy", "only 'auto'")
    return TranscriptionRequest(
        task=task,
        model=_required(form, "model"),
        file=upload,
        language=_text(form, "language") or None,
        prompt=_text(form, "prompt"),
        response_format=response_format,
        temperature=_temperature(form),
        granularities=granularities,
        stream=stream,
    )


def _values(form: Form, name: str) -> list[str]:
    return form.fields.get(name, []) + form.fields.get(name + "[]", [])


def _text(form: Form, name: str) -> str | None:
    values = _values(form, name)
    if not values:
        return None
    if len(values) > 1:
        raise invalid(name, f"`{name}` was given {len(values)} times")
    return values[0]


def _required(form: Form, name: str) -> str:
    value = _text(form, name)
    if not value:
        raise invalid(name, f"`{name}` is required")
    return value


def _file(form: Form) -> UploadedFile:
    files = form.files.get("file", [])
    if not files:
        if form.fields.get("file"):
            raise invalid("file", "`file` must be a file upload, not a text field")
        raise invalid("file", "`file` is required: the audio file to transcribe")
    if len(files) > 1:
        raise invalid("file", "send one `file`")
    if not files[0].data:
        raise invalid("file", "`file` is empty: the upload holds no audio")
    return files[0]


def _temperature(form: Form) -> float | None:
    value = _text(form, "temperature")
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except ValueError:
        raise invalid("temperature", "`temperature` must be a number") from None
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise invalid("temperature", "`temperature` must be between 0 and 1")
    return number


def _granularities(form: Form, response_format: str) -> list[str]:
    values = _values(form, "timestamp_granularities")
    if not values:
        return ["segment"]
    for value in values:
        if value not in ("word", "segment"):
            raise invalid(
                "timestamp_granularities",
                f"`timestamp_granularities` may hold 'word' and 'segment', not {value!r}",
            )
    if response_format != "verbose_json":
        raise invalid(
            "timestamp_granularities",
            "`timestamp_granularities` needs `response_format` verbose_json",
        )
    # Segments are always there (they carry the words); order as OpenAI lists them.
    return [g for g in ("word", "segment") if g in values or g == "segment"]


def _stream(form: Form) -> bool:
    value = (_text(form, "stream") or "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise invalid("stream", "`stream` must be true or false")


def _include(form: Form) -> None:
    for value in _values(form, "include"):
        if value == "logprobs":
            raise unsupported("include", "logprobs")
        raise invalid("include", f"`include` may not hold {value!r}")
