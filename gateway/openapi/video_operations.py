"""The video API's responses in /openapi.json (gateway/api/videos/): the job's creation, list,
retrieval, deletion and content; in the shape of responses.py's operations (routes, 2xx, error
statuses)."""

from __future__ import annotations

from typing import Any

from gateway.openapi.response_parts import MODEL_404, binary_body, json_body, ok

NO_MODEL = "The `model` named is not served here."
NO_VIDEO = "No video job has this id (kept in memory, for an hour once finished)."
BODY_ERRORS = {400: "", 404: MODEL_404, 413: "", 503: ""}

VIDEO_OPERATIONS: dict[str, tuple[tuple[tuple[str, str], ...], dict[str, Any], dict[int, str]]] = {
    "createVideo": (
        (("POST", "/v1/videos"),),
        ok("The job, queued: poll GET /v1/videos/{video_id}.", json_body("Video")),
        {
            **BODY_ERRORS,
            404: NO_MODEL,
            503: "+ Also: as many video jobs as are kept are unfinished (`queue_full`).",
        },
    ),
    "listVideos": (
        (("GET", "/v1/videos"),),
        ok("The video jobs kept here.", json_body("VideoList")),
        {400: "A `limit`, `order` or `after` that is not one."},
    ),
    "getVideo": (
        (("GET", "/v1/videos/{video_id}"),),
        ok("The job.", json_body("Video")),
        {404: NO_VIDEO},
    ),
    "deleteVideo": (
        (("DELETE", "/v1/videos/{video_id}"),),
        ok("The job was forgotten (a running one aborted).", json_body("VideoDeleted")),
        {404: NO_VIDEO},
    ),
    "getVideoContent": (
        (("GET", "/v1/videos/{video_id}/content"),),
        ok(
            "`variant=video` (default): the MP4 (H.264 and AAC); `thumbnail`: the first frame "
            "as a lossless WebP.",
            {"video/mp4": binary_body("The MP4."), "image/webp": binary_body("The first frame.")},
        ),
        {400: "+ Also: a job not completed, or a `variant` not made here.", 404: NO_VIDEO},
    ),
}
