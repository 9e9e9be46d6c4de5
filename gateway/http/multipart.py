"""A `multipart/form-data` body (OpenAI's audio uploads) read under a size limit, then parsed.

The size is enforced before any parsing: a Content-Length past the limit is refused at once
(413), and a body without one is counted as it streams in and refused the moment it passes
the limit, so an oversized upload never reaches the parser or a temporary file. Parsing is
Starlette's (python-multipart). File parts come back as bytes: the gateway never decodes
audio, it hands the bytes to the worker.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from starlette import formparsers
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request

from gateway.http.errors import SERVER_ERROR, APIError, invalid

MAX_FIELDS = 64  # an OpenAI audio request has about ten
MAX_FILES = 4
MAX_FIELD_BYTES = 1024 * 1024  # one text field (a prompt is at most a few hundred tokens)


@dataclass(slots=True)
class UploadedFile:
    filename: str
    content_type: str
    data: bytes


@dataclass(slots=True)
class Form:
    """Every field and file of a form, in arrival order under each name."""

    fields: dict[str, list[str]] = field(default_factory=dict)
    files: dict[str, list[UploadedFile]] = field(default_factory=dict)

    def names(self) -> list[str]:
        return [*self.fields, *self.files]


def too_large(limit: int) -> APIError:
    return APIError(
        413,
        f"The request body exceeds {limit} bytes (the upload limit, --max-body-mb)",
        param="file",
        code="request_too_large",
    )


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, or 413 as soon as it is known to pass `limit` bytes."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def read_form(
    request: Request, limit: int, file_field: str = "file", what: str = "the audio file"
) -> Form:
    """The request's multipart form; 400 when it is not one (naming `file_field`, the part
    that carries `what`), 413 past `limit` bytes."""
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        raise invalid(
            file_field,
            f"The request body must be multipart/form-data, with {what} as `{file_field}`",
            code="invalid_content_type",
        )
    if formparsers.multipart is None:
        # Not implemented here (501), and the same for every retry: the operator installs it.
        raise APIError(
            501,
            "Uploads need python-multipart, which this server does not have: its "
            "operator installs the `audio` or `images` extra (pip install 'vllm-omni-mlx[audio]', or "
            "`make serve` in a checkout)",
            type=SERVER_ERROR,
            code="missing_dependency",
        )
    body = await read_body(request, limit)

    async def one_chunk() -> AsyncIterator[bytes]:
        yield body

    parser = MultiPartParser(
        request.headers,
        one_chunk(),
        max_files=MAX_FILES,
        max_fields=MAX_FIELDS,
        max_part_size=MAX_FIELD_BYTES,
    )
    try:
        data = await parser.parse()
    except MultiPartException as exc:
        raise invalid(None, f"Malformed multipart body: {exc.message}") from None
    form = Form()
    try:
        for name, value in data.multi_items():
            if isinstance(value, UploadFile):
                upload = UploadedFile(
                    value.filename or "", value.content_type or "", await value.read()
                )
                form.files.setdefault(name, []).append(upload)
            else:
                form.fields.setdefault(name, []).append(value)
    finally:
        await data.close()
    return form


_TRUE, _FALSE = ("true", "1"), ("false", "0")


def form_value(name: str, text: str, kind: object) -> object:
    """A text part read as the JSON type its field's schema names (`kind`: "number",
    "integer", "boolean", else the text itself); a 400 naming the field when it is not one."""
    if kind == "number":
        try:
            value = float(text)
        except ValueError:
            raise invalid(name, f"`{name}` must be a number") from None
        if not math.isfinite(value):
            raise invalid(name, f"`{name}` must be a finite number")
        return value
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise invalid(name, f"`{name}` must be an integer") from None
    if kind == "boolean":
        folded = text.strip().lower()
        if folded in _TRUE + _FALSE:
            return folded in _TRUE
        raise invalid(name, f"`{name}` must be true or false")
    return text
