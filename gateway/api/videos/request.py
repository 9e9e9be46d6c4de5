"""`POST /v1/videos` bodies -> a `VideoCall`, or a 400 naming the field.

OpenAI's SDKs send the create body as a multipart form (`FORM`; text parts, and
`input_reference` as a file part); its JSON shape is taken too (`CREATE`). Honoured: `prompt`,
`model`, `seconds` (the clip's length: the model makes the next length its frames come in,
within its own range), `size` (`WIDTHxHEIGHT`, within the model's bounds), and the
extensions `seed` and `num_inference_steps`. Refused by name: `input_reference` (the video
models served here make clips from text only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gateway.http.errors import invalid, unknown_field
from gateway.http.multipart import Form, form_value
from gateway.schema import field as s
from gateway.schema.readers import integer, string
from gateway.schema.request import RequestSchema
from protocol.inputs import MAX_SEED, VideoInputs
from protocol.ready import VideoInfo

MAX_PROMPT_CHARS = 32000  # OpenAI's bound; the worker also bounds its tokens
_REFERENCE = {
    "anyOf": [
        {"type": "string", "contentMediaType": "application/octet-stream"},
        {
            "type": "object",
            "properties": {"image_url": {"type": "string"}, "file_id": {"type": "string"}},
        },
    ]
}

CREATE = RequestSchema(
    {
        "prompt": s.string("What the clip shows.", minLength=1, maxLength=MAX_PROMPT_CHARS),
        "model": s.string(
            "The served video model's id, or one of OpenAI's names for it (sora-2, sora-2-pro); "
            "default: the served video model."
        ),
        "seconds": s.string(
            "The clip's length in seconds, a number as text (OpenAI's 4, 8, 12; the model's "
            "range, MiniMax-H3's 5 to 14.375, is in a 400's message); the model makes the next length its frames come in. "
            "Default: the model's shortest."
        ),
        "size": s.string(
            "WIDTHxHEIGHT in pixels (multiples of the model's step, within its pixels and "
            "aspect ratio; a 400's message says which). Default: the model's own canvas."
        ),
        "input_reference": s.refused(
            "A picture to start from: the video models served here make clips from text only.",
            schema=_REFERENCE,
        ),
        "seed": s.integer("Extension: the seed the clip is made with.", 0, MAX_SEED),
        "num_inference_steps": s.integer("Extension (vLLM-Omni): denoising steps.", 1),
    },
    required=("prompt",),
)


@dataclass(frozen=True)
class VideoCall:
    model: str | None
    prompt: str
    seconds: float | None  # None: the model's shortest clip
    size: tuple[int, int] | None  # None: the model's canvas
    steps: int | None
    seed: int | None

    def inputs(self, info: VideoInfo) -> VideoInputs:
        """The worker's request, checked against the model (a 400 naming `size`, `seconds`
        or `num_inference_steps`)."""
        width, height = self.size or (info.default_width, info.default_height)
        if not _fits(info, width, height):
            raise invalid(
                "size",
                f"`size` {width}x{height}: this model makes sides in multiples of "
                f"{info.side_multiple}, at most {info.max_pixels} pixels, the longer side at "
                f"most {info.max_aspect:g} times the shorter",
            )
        seconds = info.min_seconds if self.seconds is None else self.seconds
        if not info.min_seconds <= seconds <= info.max_seconds:
            raise invalid(
                "seconds",
                f"`seconds` {seconds:g}: this model makes {info.min_seconds:g} to "
                f"{info.max_seconds:g} seconds",
            )
        if self.steps is not None and not info.min_steps <= self.steps <= info.max_steps:
            raise invalid(
                "num_inference_steps",
                f"`num_inference_steps` must be {info.min_steps} to {info.max_steps} for this "
                "model",
            )
        return VideoInputs(self.prompt, width, height, seconds, self.steps, self.seed)


def _fits(info: VideoInfo, width: int, height: int) -> bool:
    return (
        width > 0
        and height > 0
        and width % info.side_multiple == 0
        and height % info.side_multiple == 0
        and width * height <= info.max_pixels
        and max(width, height) <= info.max_aspect * min(width, height)
    )


def parse_json(body: dict[str, Any]) -> VideoCall:
    CREATE.check(body)
    return _call(body)


def parse_form(form: Form) -> VideoCall:
    """The SDKs' multipart body: text parts as JSON fields; a file part is `input_reference`."""
    body: dict[str, Any] = {}
    for name, values in form.fields.items():
        if name not in CREATE:
            raise unknown_field(name)
        if len(values) > 1:
            raise invalid(name, f"`{name}` was given {len(values)} times")
        body[name] = form_value(name, values[0], CREATE.fields[name].schema.get("type"))
    for name in form.files:
        if name in CREATE and name != "input_reference":
            raise invalid(name, f"`{name}` must be a text part, not a file")
        if name not in CREATE:
            raise unknown_field(name)
        body[name] = "(file)"
    CREATE.check(body)
    return _call(body)


def _call(body: dict[str, Any]) -> VideoCall:
    return VideoCall(
        model=string(body, "model") or None,
        prompt=string(body, "prompt") or "",
        seconds=_seconds(string(body, "seconds")),
        size=_size(string(body, "size")),
        steps=integer(body, "num_inference_steps", 1),
        seed=integer(body, "seed", 0, MAX_SEED),
    )


def _seconds(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0 or len(text) > 16:
        raise invalid("seconds", f"`seconds` must be a positive number of seconds, got {text!r}")
    return value


def _size(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() and len(p) <= 5 for p in parts):
        raise invalid("size", f"`size` must be WIDTHxHEIGHT (e.g. 1280x720), got {text!r}")
    return int(parts[0]), int(parts[1])
