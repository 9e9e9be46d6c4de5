"""Media parts of OpenAI and Anthropic messages -> the worker contract's placeholder parts.

A `MediaCollector` goes along while a request's messages are parsed: each image, audio or video
part is checked against what the loaded model accepts (Ready.capabilities "image_in" /
"audio_in" / "video_in"), its shape validated, and recorded as a `MediaItem`; the message gets
`{"type": "image"}`, `{"type": "audio"}` or `{"type": "video", ...its frame sampling}` in its
place. The bytes are fetched and checked later (resolve.py), just
before the Submit, so parsing stays synchronous and cheap.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from gateway.http.errors import APIError, invalid, unknown_field, unsupported
from gateway.media.audio import AUDIO_FORMATS
from gateway.workers.errors import EngineUnavailable
from gateway.workers.protocol import EngineClient
from protocol.inputs import VIDEO_MAX_FRAMES_DEFAULT

CAPABILITY = {"image": "image_in", "audio": "audio_in", "video": "video_in"}
# A video part's frame sampling (vLLM-style `video_url` parts, with these two extensions):
# frames are taken at `fps` (default: the model's video processor's, 2 for Qwen-VL) and at most
# `max_frames` of them, evenly spread over the clip.
VIDEO_MAX_FRAMES_LIMIT = 64
VIDEO_PARTS_LIMIT = 4  # a request's video parts
VIDEO_FPS_LIMIT = 30.0
DETAILS = ("auto", "low", "high")
# Anthropic's accepted image types.
ANTHROPIC_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


@dataclass(frozen=True, slots=True)
class MediaItem:
    """One media part, not yet fetched: exactly one of `url` and `data` is set."""

    kind: str  # "image" | "audio" | "video"
    path: str  # the part's JSON path, which errors name
    url: str | None = None  # data: / http(s): / file: URL, or a bare local path
    data: str | None = None  # base64 (OpenAI input_audio, Anthropic base64 images)
    format: str | None = None  # audio: "wav" | "mp3"


@dataclass(slots=True)
class MediaCollector:
    """What the model accepts, and the media parts met so far, in order of appearance.

    `capabilities` None means no worker is ready (a media part is then a 503); `refusal`,
    when set, refuses every media part with that reason (e.g. count_tokens)."""

    capabilities: Collection[str] | None = ()
    model: str | None = None
    refusal: str | None = None
    items: list[MediaItem] = field(default_factory=list)
    # A served recognizer can hear audio parts for a model that cannot: they are admitted, to
    # become their transcripts (gateway/generation/audio_parts.py); `transcribing` says some were.
    transcribes: bool = False
    transcribing: bool = False

    @classmethod
    def for_engine(cls, engine: EngineClient, transcribes: bool = False) -> MediaCollector:
        ready = engine.ready_info
        if ready is None or engine.state != "ready":
            return cls(capabilities=None, model=engine.model_name)
        capabilities = [str(c) for c in ready.capabilities]
        return cls(capabilities=capabilities, model=engine.model_name, transcribes=transcribes)

    def admit(self, kind: str, path: str) -> None:
        """Refuse a `kind` part at `path` the model cannot take (400 naming `path.type`)."""
        param = f"{path}.type"
        if self.refusal is not None:
            raise unsupported(param, self.refusal)
        if self.capabilities is None:
            raise EngineUnavailable("no model is ready to check its media support", 1.0)
        if kind == "audio" and CAPABILITY[kind] not in self.capabilities and self.transcribes:
            self.transcribing = True
            return
        if CAPABILITY[kind] not in self.capabilities:
            model = f"model `{self.model}`" if self.model else "this model"
            raise APIError(
                400,
                f"`{param}`: {model} does not accept {kind} input (serve a model with "
                f"{kind} support)",
                param=param,
                code="unsupported_content",
            )

    def add(self, item: MediaItem) -> dict[str, str]:
        self.items.append(item)
        return {"type": item.kind}


def _keys(value: dict, allowed: Collection[str], path: str) -> None:
    for key in value:
        if key not in allowed:
            raise unknown_field(f"{path}.{key}")


def _string(value: dict, key: str, path: str) -> str:
    text = value.get(key)
    if not isinstance(text, str) or not text:
        raise invalid(f"{path}.{key}", f"`{path}.{key}` must be a non-empty string")
    return text


def _url_object(part: dict, key: str, path: str, allowed: tuple[str, ...]) -> dict:
    """The part's `{key: {"url", ...}}` object (a bare URL string stands for `{"url": ...}`)."""
    value = part.get(key)
    if isinstance(value, str):
        value = {"url": value}
    if not isinstance(value, dict):
        raise invalid(f"{path}.{key}", f"`{path}.{key}` must be an object with a `url`")
    _keys(value, allowed, f"{path}.{key}")
    return value


def openai_image(part: dict, path: str, media: MediaCollector) -> dict[str, str]:
    """`{"type": "image_url", "image_url": {"url": ..., "detail": ...}}` (or a bare URL string).
    `detail` is accepted and validated; the model's own processor sets the resolution."""
    media.admit("image", path)
    _keys(part, ("type", "image_url"), path)
    image = _url_object(part, "image_url", path, ("url", "detail"))
    detail = image.get("detail")
    if detail is not None and detail not in DETAILS:
        raise invalid(
            f"{path}.image_url.detail", f"`{path}.image_url.detail` must be one of {list(DETAILS)}"
        )
    url = _string(image, "url", f"{path}.image_url")
    return media.add(MediaItem("image", f"{path}.image_url.url", url=url))


def openai_audio_url(part: dict, path: str, media: MediaCollector) -> dict[str, str]:
    """`{"type": "audio_url", "audio_url": {"url": ...}}` (vLLM's; or a bare URL string): a data
    URL, or an http(s) URL fetched under the same rules as images; wav or mp3, told by its bytes."""
    media.admit("audio", path)
    _keys(part, ("type", "audio_url"), path)
    audio = _url_object(part, "audio_url", path, ("url",))
    url = _string(audio, "url", f"{path}.audio_url")
    return media.add(MediaItem("audio", f"{path}.audio_url.url", url=url))


def openai_video_url(part: dict, path: str, media: MediaCollector) -> dict[str, Any]:
    """`{"type": "video_url", "video_url": {"url": ..., "fps": ..., "max_frames": ...}}` (vLLM's
    part, or a bare URL string): a data URL, or an http(s) URL fetched under the same rules as
    images; its frames are decoded and sampled in the worker, as mlx-vlm samples them."""
    media.admit("video", path)
    _keys(part, ("type", "video_url"), path)
    video = _url_object(part, "video_url", path, ("url", "fps", "max_frames"))
    url = _string(video, "url", f"{path}.video_url")
    if sum(item.kind == "video" for item in media.items) >= VIDEO_PARTS_LIMIT:
        raise invalid(path, f"`{path}`: a request holds at most {VIDEO_PARTS_LIMIT} video parts")
    sampling: dict[str, Any] = {}
    fps = video.get("fps")
    if fps is not None:
        if _not_number(fps) or not 0 < fps <= VIDEO_FPS_LIMIT:
            raise invalid(
                f"{path}.video_url.fps",
                f"`{path}.video_url.fps` must be a number above 0 and at most {VIDEO_FPS_LIMIT:g}",
            )
        sampling["fps"] = float(fps)
    frames = video.get("max_frames", VIDEO_MAX_FRAMES_DEFAULT)
    if (
        isinstance(frames, bool)
        or not isinstance(frames, int)
        or not 2 <= frames <= VIDEO_MAX_FRAMES_LIMIT
    ):
        raise invalid(
            f"{path}.video_url.max_frames",
            f"`{path}.video_url.max_frames` must be an integer from 2 to {VIDEO_MAX_FRAMES_LIMIT}",
        )
    sampling["max_frames"] = frames
    return {**media.add(MediaItem("video", f"{path}.video_url.url", url=url)), **sampling}


def _not_number(value: Any) -> bool:
    return isinstance(value, bool) or not isinstance(value, int | float)


def openai_audio(part: dict, path: str, media: MediaCollector) -> dict[str, str]:
    """`{"type": "input_audio", "input_audio": {"data": base64, "format": "wav" | "mp3"}}`."""
    media.admit("audio", path)
    _keys(part, ("type", "input_audio"), path)
    audio = part.get("input_audio")
    if not isinstance(audio, dict):
        raise invalid(f"{path}.input_audio", f"`{path}.input_audio` must be an object")
    _keys(audio, ("data", "format"), f"{path}.input_audio")
    data = _string(audio, "data", f"{path}.input_audio")
    fmt = audio.get("format")
    if fmt not in AUDIO_FORMATS:
        raise invalid(
            f"{path}.input_audio.format",
            f"`{path}.input_audio.format` must be one of {list(AUDIO_FORMATS)}",
        )
    return media.add(MediaItem("audio", f"{path}.input_audio.data", data=data, format=fmt))


def anthropic_image(block: dict, path: str, media: MediaCollector) -> dict[str, str]:
    """`{"type": "image", "source": {"type": "base64", "media_type", "data"} | {"type": "url",
    "url"}}`; `cache_control` is accepted (the prefix cache is automatic)."""
    media.admit("image", path)
    _keys(block, ("type", "source", "cache_control"), path)
    source = block.get("source")
    spath = f"{path}.source"
    if not isinstance(source, dict):
        raise invalid(spath, f"`{spath}` must be an object")
    kind = source.get("type")
    if kind == "base64":
        _keys(source, ("type", "media_type", "data"), spath)
        media_type = source.get("media_type")
        if media_type not in ANTHROPIC_IMAGE_TYPES:
            raise invalid(
                f"{spath}.media_type",
                f"`{spath}.media_type` must be one of {list(ANTHROPIC_IMAGE_TYPES)}",
            )
        data = _string(source, "data", spath)
        return media.add(MediaItem("image", f"{spath}.data", data=data))
    if kind == "url":
        _keys(source, ("type", "url"), spath)
        url = _string(source, "url", spath)
        return media.add(MediaItem("image", f"{spath}.url", url=url))
    if isinstance(kind, str):
        raise unsupported(f"{spath}.type", f"image source type {kind!r}")
    raise invalid(f"{spath}.type", f"`{spath}.type` must be 'base64' or 'url'")


def joined_or_parts(parts: list[dict[str, str]]) -> str | list[dict[str, str]]:
    """Text-only content stays one string (text parts joined with newlines, as before media
    existed); content holding media becomes the contract's list of parts, in order."""
    if all(part["type"] == "text" for part in parts):
        return "\n".join(part["text"] for part in parts)
    return parts
