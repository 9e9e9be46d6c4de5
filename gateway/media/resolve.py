"""Turn a request's collected media items into checked bytes, just before the Submit.

Items are resolved concurrently (remote fetches overlap); the first failure cancels the rest
and becomes a 400 naming the item's JSON path. Decoding and Pillow checks run in threads so
the event loop keeps serving other requests.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from gateway.http.errors import APIError
from gateway.media.addresses import AddressPolicy, address_problem
from gateway.media.audio import AUDIO_FORMATS, check_audio, sniff_audio_format
from gateway.media.fetch import FetchLimits, fetch
from gateway.media.images import check_image
from gateway.media.inline import decode_base64, parse_data_url
from gateway.media.local import read_local
from gateway.media.parts import MediaItem
from gateway.media.problems import INVALID, REFUSED_ADDRESS, MediaRejected
from gateway.media.video import check_video

MEDIA_KEYS = {"image": "images", "audio": "audios", "video": "videos"}


@dataclass(frozen=True, slots=True)
class MediaSettings:
    """The server's media limits (ServerConfig's media fields)."""

    max_bytes: int = 20 * 2**20
    fetch_timeout: float = 10.0
    max_image_pixels: int = 40_000_000
    allowed_local_dir: str | None = None
    policy: AddressPolicy = address_problem  # tests inject their own notion of "public"

    @classmethod
    def from_config(cls, config: Any) -> MediaSettings:
        return cls(
            max_bytes=config.media_max_bytes,
            fetch_timeout=config.media_fetch_timeout,
            max_image_pixels=config.max_image_pixels,
            allowed_local_dir=config.allowed_local_media_path,
        )


@dataclass(frozen=True, slots=True)
class PendingMedia:
    """A parsed request's media, resolved by `resolve()` when the request is about to run."""

    items: tuple[MediaItem, ...]
    settings: MediaSettings

    async def resolve(self) -> dict[str, list[bytes]]:
        """`{"images": [...], "audios": [...], "videos": [...]}` (only the kinds present), in
        order."""
        return await resolve_media(self.items, self.settings)


async def resolve_media(
    items: tuple[MediaItem, ...] | list[MediaItem], settings: MediaSettings
) -> dict[str, list[bytes]]:
    if not items:
        return {}
    tasks = [asyncio.ensure_future(_resolve(item, settings)) for item in items]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            task.cancel()
    out: dict[str, list[bytes]] = {}
    for item, task in zip(items, tasks, strict=True):
        if task.cancelled():
            continue
        exc = task.exception()
        if isinstance(exc, MediaRejected):
            raise APIError(400, f"`{item.path}`: {exc.message}", param=item.path, code=exc.code)
        if exc is not None:
            raise exc
    for item, task in zip(items, tasks, strict=True):
        out.setdefault(MEDIA_KEYS[item.kind], []).append(task.result())
    return out


async def _resolve(item: MediaItem, settings: MediaSettings) -> bytes:
    data = await _bytes(item, settings)
    if item.kind == "audio":
        fmt = item.format or sniff_audio_format(data)
        if fmt is None:
            raise MediaRejected(f"the audio is none of {list(AUDIO_FORMATS)}", INVALID)
        check_audio(data, fmt)
        return data
    if item.kind == "video":
        check_video(data)
        return data
    await asyncio.to_thread(check_image, data, settings.max_image_pixels)
    return data


async def _bytes(item: MediaItem, settings: MediaSettings) -> bytes:
    """The item's bytes: inline base64, a data URL, a fetched URL, or a permitted local file."""
    if item.data is not None:
        what = f"the {item.kind}"
        return await asyncio.to_thread(decode_base64, item.data, settings.max_bytes, what)
    url = item.url or ""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "data":
        _, data = await asyncio.to_thread(parse_data_url, url, settings.max_bytes)
        return data
    if scheme in ("http", "https"):
        limits = FetchLimits(settings.max_bytes, settings.fetch_timeout, settings.policy)
        return await fetch(url, limits)
    if scheme == "file" or not scheme or not scheme.isalpha() or len(scheme) == 1:
        return await asyncio.to_thread(
            read_local, url, settings.allowed_local_dir, settings.max_bytes
        )
    raise MediaRejected(
        f"refused {url[:100]!r}: URL scheme {scheme!r} is not supported (use https, http, "
        "or a data URL)",
        REFUSED_ADDRESS,
    )


def media_settings(request: Any) -> MediaSettings:
    """The app's media settings: `app.state.media_settings` when set (tests inject an address
    policy there), else the server config's."""
    state = request.app.state
    settings = getattr(state, "media_settings", None)
    return settings if settings is not None else MediaSettings.from_config(state.config)
