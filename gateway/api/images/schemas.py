"""The response schemas of `/v1/images/generations` and `/v1/images/edits` (for /openapi.json)."""

from __future__ import annotations

from gateway.schema.builders import (
    INTEGER,
    STRING,
    Schema,
    _all,
    _array,
    _doc,
    _enum,
    _event,
    _obj,
    _ref,
)
from gateway.schema.error_bodies import OPENAI_ERROR

_USAGE = _all(
    {
        "input_tokens": _doc(INTEGER, "The prompt's tokens, as the text encoder reads it."),
        "output_tokens": _doc(INTEGER, "Denoising steps run, all pictures together."),
        "total_tokens": INTEGER,
        "input_tokens_details": _all({"text_tokens": INTEGER, "image_tokens": INTEGER}),
    }
)
_ABOUT = {
    "b64_json": _doc(STRING, "Base64 of the picture's file (`output_format`)."),
    "created_at": INTEGER,
    "size": _enum("1024x1024", "1024x1536", "1536x1024", "auto", doc="auto: another size."),
    "quality": _enum("low", "medium", "high", "auto"),
    "background": _enum("opaque", "auto"),
    "output_format": _enum("png", "jpeg", "webp"),
}


def _stream(kind: str) -> Schema:
    return {
        "oneOf": [
            _event(
                f"{kind}.partial_image",
                {**_ABOUT, "partial_image_index": INTEGER},
                "A preview: the latents after a denoising step, decoded.",
            ),
            _event(f"{kind}.completed", {**_ABOUT, "usage": _USAGE}, "A picture, done."),
            _event("error", {"error": OPENAI_ERROR}, "A failure after the stream started."),
        ]
    }


SCHEMAS: dict[str, Schema] = {
    "ImagesResponse": _obj(
        {
            "created": INTEGER,
            "data": _array(
                _obj(
                    {
                        "b64_json": _doc(STRING, "Base64 of the picture's file."),
                        "url": _doc(STRING, "`response_format: url`: a data: URL of it."),
                    }
                ),
                "The pictures, in order (picture i made with seed + i).",
            ),
            "background": _enum("opaque"),
            "output_format": _enum("png", "jpeg", "webp"),
            "size": _doc(STRING, "Only for OpenAI's sizes."),
            "quality": _enum("low", "medium", "high"),
            "usage": _ref("ImagesUsage"),
        },
        ["created", "data", "background", "output_format", "usage"],
    ),
    "ImagesUsage": _USAGE,
    "ImageGenerationStreamEvent": _stream("image_generation"),
    "ImageEditStreamEvent": _stream("image_edit"),
}
