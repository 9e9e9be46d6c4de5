"""Video parts: the file's frames sampled exactly as mlx-vlm samples a video file, within the
server's bounds, and the prompt with the video markers where the parts were.

Frames: `mlx_vlm.utils.load_video` on the file (OpenCV's FFmpeg backend), with the sampling
`mlx_vlm.utils.prepare_inputs` resolves for the processor (`resolve_video_sampling`: the part's
`fps` and `max_frames` over the processor's defaults), and the same frame sampler. The frames
and their `VideoMetadata` then go to `prepare_inputs` as already-decoded videos, which is what
it does with a path itself: the same pixels and timestamps as `stream_generate(..., video=path)`.
Before decoding, the clip's header is read and refused by name when it is longer than
`MAX_SECONDS` or its sampled frames would hold more than `MAX_SAMPLED_PIXELS`.

Prompt: mlx-vlm's `apply_chat_template(..., video=paths)` puts a video item first in a message
and drops video items given as parts, so the messages are built with `return_messages=True`
and the video items put back where the client's parts were, then rendered by
`get_chat_template`: for videos at the start of a user message (what mlx-vlm itself builds),
the same prompt text.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from worker.runtime.errors import bad_request

MAX_SECONDS = 1800.0
MAX_SAMPLED_PIXELS = 1 << 27  # frames x width x height before the processor resizes (~400 MB)


@dataclass
class DecodedVideo:
    frames: Any  # (T, C, H, W) uint8, as mlx_vlm.utils.load_video returns them
    metadata: Any  # mlx_vlm.utils.VideoMetadata


def decode_videos(processor: Any, videos: Sequence[bytes], sampling: Sequence[dict]) -> list:
    """Each video's sampled frames; `sampling[i]` holds video i's "fps" / "max_frames"."""
    return [
        _decode(processor, i, data, dict(s))
        for i, (data, s) in enumerate(zip(videos, sampling, strict=True))
    ]


def _decode(processor: Any, i: int, data: bytes, overrides: dict) -> DecodedVideo:
    import cv2
    from mlx_vlm.utils import load_video, resolve_video_sampling

    sampling = resolve_video_sampling(processor, overrides)
    component = getattr(processor, "video_processor", None)
    sampler = (
        getattr(component, "sample_frames", None)
        if getattr(component, "sample_frames_in_loader", False)
        else None
    )
    with tempfile.TemporaryDirectory(prefix="vomlx-video-") as tmp:
        path = os.path.join(tmp, f"video{i}")
        with open(path, "wb") as f:
            f.write(data)
        capture = cv2.VideoCapture(path)
        try:
            if not capture.isOpened():
                raise bad_request(f"videos[{i}] is not a video this server can decode")
            count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
            rate = capture.get(cv2.CAP_PROP_FPS) or 0.0
            pixels = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)) * int(
                capture.get(cv2.CAP_PROP_FRAME_HEIGHT)
            )
        finally:
            capture.release()
        if count <= 0 or rate <= 0 or pixels <= 0:
            raise bad_request(f"videos[{i}] has no decodable frames")
        if count / rate > MAX_SECONDS:
            raise bad_request(
                f"videos[{i}] lasts {count / rate:.0f} s: at most {MAX_SECONDS:.0f} s are accepted"
            )
        most = min(sampling.max_frames or count, count)
        if most * pixels > MAX_SAMPLED_PIXELS:
            raise bad_request(
                f"videos[{i}]: {most} frames of {pixels} pixels are over the server's "
                f"{MAX_SAMPLED_PIXELS} sampled pixels; lower max_frames or the resolution"
            )
        try:
            frames, metadata = load_video(path, sampling, frame_sampler=sampler)
        except (ValueError, cv2.error) as exc:
            raise bad_request(f"videos[{i}] could not be decoded: {exc}") from None
    return DecodedVideo(frames, metadata)


def with_video_items(messages: list[dict], parts_of: dict[int, list[dict]]) -> list[dict]:
    """mlx-vlm's rendered `messages` with each message's video items put back in place:
    `parts_of[i]` is message i's contract parts (text / image / video), whose non-video parts
    line up with the rendered ones (mlx-vlm keeps text and image parts in order, skipping
    empty texts)."""
    out = []
    for i, message in enumerate(messages):
        parts = parts_of.get(i)
        content = message.get("content")
        if not parts or not any(p["type"] == "video" for p in parts):
            out.append(message)
            continue
        rendered = list(content) if isinstance(content, list) else []
        placed: list[Any] = []
        for part in parts:
            if part["type"] == "video":
                placed.append({"type": "video"})
            elif part["type"] == "image" or part.get("text"):
                if rendered:
                    placed.append(rendered.pop(0))
        out.append({**message, "content": placed + rendered})
    return out
