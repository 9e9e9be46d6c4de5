"""Pictures from the worker (RGB bytes) -> the Images API's files, bodies and events.

Encoding is Pillow's: PNG (lossless; `output_compression` does not apply), JPEG and WebP at
`output_compression` quality. A picture goes out as `b64_json`, or with `response_format: url`
as a `data:` URL of the same file (this server keeps no files to link to). The OpenAI document
lists only its own sizes and qualities in a response: another size is left out of the body and
reported as `auto` in stream events, `standard` as `auto` and `hd` as `high`.
"""

from __future__ import annotations

import base64
import io
import time
from typing import Any

from gateway.api.images.request import ImageCall
from protocol.messages import ImageOut, Usage

MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}
OPENAI_SIZES = ("1024x1024", "1024x1536", "1536x1024")
OPENAI_QUALITIES = {"low": "low", "medium": "medium", "high": "high", "hd": "high"}


def encode(picture: ImageOut, output_format: str, compression: int) -> bytes:
    """The picture as a file of `output_format`."""
    from PIL import Image

    image = Image.frombytes("RGB", (picture.width, picture.height), picture.pixels)
    buffer = io.BytesIO()
    if output_format == "png":
        image.save(buffer, format="PNG")
    else:
        image.save(buffer, format=output_format.upper(), quality=compression)
    return buffer.getvalue()


def encoded(call: ImageCall, picture: ImageOut) -> str:
    """Base64 of the picture's file."""
    return base64.b64encode(encode(picture, call.output_format, call.compression)).decode()


def image_object(call: ImageCall, picture: ImageOut) -> dict[str, str]:
    data = encoded(call, picture)
    if call.response_format == "url":
        return {"url": f"data:{MEDIA_TYPES[call.output_format]};base64,{data}"}
    return {"b64_json": data}


def usage_object(usage: Usage) -> dict[str, Any]:
    """The Images API's usage: input tokens are the prompt's, as the model's text encoder
    reads it; output tokens are the denoising steps run (this server's unit of work)."""
    return {
        "input_tokens": usage.prompt_tokens,
        "output_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "input_tokens_details": {"text_tokens": usage.prompt_tokens, "image_tokens": 0},
    }


def size_text(call: ImageCall, picture: ImageOut) -> str:
    return f"{picture.width}x{picture.height}"


def response_body(call: ImageCall, pictures: list[ImageOut], usage: Usage) -> dict[str, Any]:
    body: dict[str, Any] = {
        "created": int(time.time()),
        "data": [image_object(call, p) for p in pictures],
        "background": "opaque",
        "output_format": call.output_format,
        "usage": usage_object(usage),
    }
    size = size_text(call, pictures[0]) if pictures else ""
    if size in OPENAI_SIZES:
        body["size"] = size
    if call.quality in OPENAI_QUALITIES:
        body["quality"] = OPENAI_QUALITIES[call.quality]
    return body


def event_fields(call: ImageCall, picture: ImageOut) -> dict[str, Any]:
    """What every stream event of a picture says of the request."""
    size = size_text(call, picture)
    return {
        "created_at": int(time.time()),
        "size": size if size in OPENAI_SIZES else "auto",
        "quality": OPENAI_QUALITIES.get(call.quality, "auto"),
        "background": call.background if call.background in ("opaque", "auto") else "auto",
        "output_format": call.output_format,
    }
