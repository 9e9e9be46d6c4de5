"""What mlx-vlm makes when called directly on a video checkpoint: the reference the server's
clips must equal (tests/unit/test_worker_videos.py, tests/e2e/test_videos.py)."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

# mlx-vlm writes MP4 with the ffmpeg program (scripts/system_packages.sh installs it); the
# video engine refuses to load without it, so the video tests skip, saying why.
HAS_FFMPEG = shutil.which("ffmpeg") is not None
needs_ffmpeg = pytest.mark.skipif(
    not HAS_FFMPEG, reason="ffmpeg is not installed (apt-get install -y ffmpeg)"
)


@dataclass(frozen=True)
class DirectClip:
    frames: np.ndarray  # frames x height x width x 3, uint8
    mp4: bytes  # what `VideoGenerationResult.save` writes


def direct_clip(
    path: str, prompt: str, seed: int, steps: int, width: int, height: int, seconds: float
) -> DirectClip:
    """`generate_video` as its own CLI calls it, with the frames `seconds` makes at 24 fps and
    the AdaLN weights kept (as the server keeps them); its MP4 from `result.save`."""
    from mlx_vlm.generate.video_generation import (
        VideoGenerationRequest,
        generate_video,
        load_video_generation_model,
    )
    from mlx_vlm.models.minimax_h3.packing import align_num_frames

    model = load_video_generation_model(path, workflow="t2va")
    request = VideoGenerationRequest(
        prompt, seed=seed, steps=steps, width=width, height=height,
        num_frames=align_num_frames(round(seconds * 24)), extra={"drop_adaln_weights": False},
    )  # fmt: skip
    result = generate_video(model, request)
    with tempfile.TemporaryDirectory() as folder:
        mp4 = result.save(Path(folder) / "clip.mp4").read_bytes()
    return DirectClip(np.array(result.frames), mp4)
