"""Video parts: the file's frames sampled exactly as mlx-vlm samples a video file, within the
server's bounds, and the prompt with the video markers where the parts were.

Frames: `mlx_vlm.utils.load_video` on the file (OpenCV's FFmpeg backend), with the sampling
`mlx_vlm.utils.prepare_inputs` resolves for the processor (`resolve_video_sampling`: the part's
`fps` and `max_frames` over the processor's defaults), and the same frame sampler. The frames
and their `VideoMetadata` then go to `prepare_inputs` as already-decoded videos, which is what
it does with a path itself: the same pixels and timestamps as `stream_generate(..., video=path)`.
Before decoding, the clip's header is read and refused by name when it is longer than
`MAX_SECONDS`, or when the request's sampled frames would hold more than `MAX_SAMPLED_PIXELS`
(one budget for all of a request's videos). Decoding runs on the MLX thread as the request is
admitted, as image decoding does.

Prompt: mlx-vlm's `apply_chat_template(..., video=paths)` puts a video item first in a message
and drops video items given as parts, so the messages are built with `return_messages=True`
and the video items put back where the client's parts were, then rendered by
`get_chat_template`: for videos at the start of a user message (what mlx-vlm itself builds),
the same prompt text.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from worker.runtime.errors import bad_request

MAX_SECONDS = 600.0
MAX_SAMPLED_PIXELS = 1 << 27  # a request's frames x width x height before resizing (~400 MB)


class PixelBudget:
    """What is left of a request's `MAX_SAMPLED_PIXELS` as its videos are decoded."""

    def __init__(self) -> None:
        self.left = MAX_SAMPLED_PIXELS

    def take(self, i: int, frames: int, pixels: int) -> None:
        if frames * pixels > self.left:
            raise bad_request(
                f"videos[{i}]: {frames} frames of {pixels} pixels are over what is left of the "
                f"server's {MAX_SAMPLED_PIXELS} sampled pixels a request; lower max_frames, "
                "the resolution or the number of videos"
            )
        self.left -= frames * pixels


@dataclass
class DecodedVideo:
    frames: Any  # (T, C, H, W) uint8, as mlx_vlm.utils.load_video returns them
    metadata: Any  # mlx_vlm.utils.VideoMetadata


def decode_videos(processor: Any, videos: Sequence[bytes], sampling: Sequence[dict]) -> list:
    """Each video's sampled frames; `sampling[i]` holds video i's "fps" / "max_frames"."""
    budget = PixelBudget()
    return [
        _decode(processor, i, data, dict(s), budget)
        for i, (data, s) in enumerate(zip(videos, sampling, strict=True))
    ]


def _decode(
    processor: Any, i: int, data: bytes, overrides: dict, budget: PixelBudget
) -> DecodedVideo:
    from mlx_vlm.utils import load_video, resolve_video_sampling

    sampling = resolve_video_sampling(processor, overrides)
    component = getattr(processor, "video_processor", None)
    sampler = (
        getattr(component, "sample_frames", None)
        if getattr(component, "sample_frames_in_loader", False)
        else None
    )
    with _clip(i, data, sampling.max_frames, budget) as (path, _count, _rate):
        frames, metadata = _load(i, lambda: load_video(path, sampling, frame_sampler=sampler))
    return DecodedVideo(frames, metadata)


def decode_stills(
    i: int, data: bytes, fps: float | None, max_frames: int, budget: PixelBudget
) -> list[Any]:
    """Video i as the still images mlx-vlm sends a model whose processor takes no video
    (`mlx_vlm.generate.video.resolve_video_inputs`): frames sampled at `fps` (default 2) under
    the library's sampling defaults, then at most `max_frames` of them evenly spread. Only the
    kept frames are decoded (the same indices `load_video` and `subsample_evenly` choose)."""
    from mlx_vlm.generate.video import subsample_evenly
    from mlx_vlm.utils import DEFAULT_VIDEO_SAMPLING, VideoSampling, load_video
    from PIL import Image

    sampling = VideoSampling(fps=fps or 2.0).merge(DEFAULT_VIDEO_SAMPLING)
    with _clip(i, data, max_frames, budget) as (path, count, rate):
        kept = subsample_evenly(_default_indices(sampling, count, rate), max_frames)
        frames, _ = _load(
            i, lambda: load_video(path, sampling, frame_sampler=lambda *_a, **_k: kept)
        )
    return [Image.fromarray(np.transpose(frame, (1, 2, 0))) for frame in frames]


def _default_indices(sampling: Any, count: int, rate: float) -> list[int]:
    """The frame indices `mlx_vlm.utils.load_video` samples by `fps` (its own arithmetic)."""
    factor = sampling.frame_factor
    low = math.ceil(sampling.min_frames / factor) * factor
    high = math.floor(min(sampling.max_frames, count) / factor) * factor
    n = math.floor(min(max(count / rate * sampling.fps, low), high, count) / factor) * factor
    if not factor <= n <= count:
        raise bad_request(f"the clip's {count} frames are too few to sample")
    return [int(x) for x in np.linspace(0, count - 1, n).round().astype(int)]


@contextmanager
def _clip(
    i: int, data: bytes, most_frames: int | None, budget: PixelBudget
) -> Iterator[tuple[str, int, float]]:
    """Video i in a file of its own, its header checked against the server's bounds: (path,
    frame count, frame rate)."""
    import cv2

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
        budget.take(i, min(most_frames or count, count), pixels)
        yield path, count, rate


def _load(i: int, load: Callable[[], Any]) -> Any:
    import cv2

    try:
        return load()
    except (ValueError, cv2.error) as exc:
        raise bad_request(f"videos[{i}] could not be decoded: {exc}") from None


def with_video_items(messages: list[dict], parts_of: dict[int, list[dict]]) -> list[dict]:
    """mlx-vlm's rendered `messages`, each message holding video parts rebuilt from the client's
    parts in their order, with mlx-vlm's own text and image items and a video item (mlx-vlm
    merges a message's texts when it holds no image, and drops video parts). A message whose
    rendering is not a list of items, or carries audio items, cannot hold a video here."""
    from mlx_vlm.prompt_utils import MessageBuilder

    out = []
    for i, message in enumerate(messages):
        parts = parts_of.get(i)
        if not parts or not any(p["type"] == "video" for p in parts):
            out.append(message)
            continue
        content = message.get("content")
        if not isinstance(content, list) or any(
            isinstance(item, dict) and item.get("type") == "audio" for item in content
        ):
            raise bad_request(
                f"messages[{i}]: this model's messages cannot hold video parts together with "
                "audio parts"
                if isinstance(content, list)
                else f"messages[{i}]: this model's chat format cannot place video parts"
            )
        items: list[dict] = []
        for part in parts:
            if part["type"] == "video":
                items.append({"type": "video"})
            elif part["type"] == "image":
                items.append(MessageBuilder.image_message())
            elif part.get("text"):
                items.append(MessageBuilder.text_message(part["text"]))
        out.append({**message, "content": items})
    return out
