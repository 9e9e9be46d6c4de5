"""The response schemas of `/v1/videos` (for /openapi.json)."""

from __future__ import annotations

from gateway.schema.builders import (
    BOOLEAN,
    INTEGER,
    STRING,
    Schema,
    _array,
    _const,
    _doc,
    _enum,
    _obj,
    _or_null,
    _ref,
)

_VIDEO = _obj(
    {
        "id": STRING,
        "object": _const("video"),
        "model": _doc(STRING, "The served video model's id."),
        "status": _enum("queued", "in_progress", "completed", "failed"),
        "progress": _doc(INTEGER, "Percent done: the denoising steps, then the encoding."),
        "created_at": INTEGER,
        "completed_at": _or_null(INTEGER),
        "expires_at": _or_null(_doc(INTEGER, "An hour after it finished: then forgotten.")),
        "prompt": _or_null(STRING),
        "size": _doc(STRING, "WIDTHxHEIGHT."),
        "seconds": _doc(STRING, "As asked for (the clip runs to the next length it makes)."),
        "remixed_from_video_id": _or_null(STRING),
        "error": _or_null(_obj({"code": STRING, "message": STRING}, ["code", "message"])),
        "seed": _or_null(
            _doc(INTEGER, "Extension: the seed, as asked for or, once made, the one drawn.")
        ),
    },
    [
        "id", "object", "model", "status", "progress", "created_at", "completed_at",
        "expires_at", "prompt", "size", "seconds", "remixed_from_video_id", "error",
    ],
)  # fmt: skip

SCHEMAS: dict[str, Schema] = {
    "Video": _VIDEO,
    "VideoList": _obj(
        {
            "object": _const("list"),
            "data": _array(_ref("Video"), "The jobs, newest first (`order=asc`: oldest)."),
            "first_id": _or_null(STRING),
            "last_id": _or_null(STRING),
            "has_more": BOOLEAN,
        },
        ["object", "data", "first_id", "last_id", "has_more"],
    ),
    "VideoDeleted": _obj(
        {"id": STRING, "object": _const("video.deleted"), "deleted": BOOLEAN},
        ["id", "object", "deleted"],
    ),
}
