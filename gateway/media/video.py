"""Check a video file before the worker sees it: its bytes start like a container the worker's
decoder (OpenCV's FFmpeg backend, as mlx-vlm uses) reads, under the byte cap (checked when it was
read). Whether its frames decode, and its length, are the worker's checks: the gateway does not
decode video."""

from __future__ import annotations

from gateway.media.problems import INVALID, MediaRejected

VIDEO_CONTAINERS = ("mp4", "mov", "webm", "mkv", "avi")


def sniff_video_container(data: bytes) -> str | None:
    """The container of a video file, from its first bytes (None: not one of ours)."""
    if len(data) >= 12 and data[4:8] == b"ftyp":  # ISO base media: MP4, MOV (qt), 3GP
        return "mov" if data[8:10] == b"qt" else "mp4"
    if len(data) >= 8 and data[4:8] in (b"moov", b"mdat", b"wide", b"free"):  # older QuickTime
        return "mov"
    if data[:4] == b"\x1a\x45\xdf\xa3":  # EBML: Matroska and WebM
        return "webm" if b"webm" in data[:64] else "mkv"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"AVI ":
        return "avi"
    return None


def check_video(data: bytes, what: str = "the video") -> None:
    if sniff_video_container(data) is None:
        raise MediaRejected(
            f"{what} is not a video file in a container this server reads "
            f"({', '.join(VIDEO_CONTAINERS)})",
            INVALID,
        )
