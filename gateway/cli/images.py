"""`serve --image-model IMAGE_MODEL` / `--video-model VIDEO_MODEL`: an image- or
video-generation checkpoint served next to MODEL by the same worker (/v1/images/generations,
/v1/images/edits; /v1/videos), resolved like MODEL. MODEL may itself be one, served alone; a
models file gives one its own worker (`kind: image`, `kind: video`)."""

from __future__ import annotations

from typing import Any

from gateway.cli.model_source import resolved_models
from gateway.cli.serve_options import Flag, config_flags


def image_options(command: Any) -> Any:
    options: list[Flag] = [
        ("--image-model", None, "Image-generation checkpoint served next to MODEL (/v1/images)."),
        ("--video-model", None, "Video-generation checkpoint served next to MODEL (/v1/videos)."),
    ]
    return config_flags(command, options)


def image_config(options: dict[str, Any]) -> dict[str, Any]:
    """ServerConfig's image and video fields from the flags (resolved like MODEL)."""
    return resolved_models(options, ("image_model", "video_model"))
