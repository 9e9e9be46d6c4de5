"""Loading a video-generation checkpoint: mlx-vlm's model, with its denoiser paced, and the
clips its family makes.

mlx-vlm 0.7 generates video with one family, MiniMax-H3 (text to video with sound). What the
server checks before a request reaches the pipeline comes from the family's own constants
(`mlx_vlm.models.minimax_h3.constants`): canvas sides in multiples of 32, at most its training
canvas's pixels, 1:4 to 4:1, 2 steps at least, and clips of 5 to 15 seconds at 24 frames a
second, whose frames come in blocks (17 after the first 5: 124, 141, ... 345): the lengths asked
for that surely land in that range are 5 to 14.375 seconds (345 frames).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.images.paced import PacedDenoiser

MAX_STEPS = 100  # the server's bound on denoising steps
DEFAULT_STEPS = 30  # mlx-vlm's (video_generation.DEFAULT_VIDEO_STEPS)


@dataclass(frozen=True)
class Clips:
    """The clips a family makes."""

    side_multiple: int
    max_pixels: int
    max_aspect: float
    min_seconds: float
    max_seconds: float
    fps: float
    default_width: int
    default_height: int
    min_steps: int = 2

    def frames(self, seconds: float) -> int:
        """The frames the pipeline makes for `seconds` (the next length it makes)."""
        from mlx_vlm.models.minimax_h3.packing import align_num_frames

        return int(align_num_frames(max(1, round(seconds * self.fps))))


@dataclass
class VideoModel:
    path: str
    family: str  # mlx-vlm's model type
    generation: Any  # mlx-vlm's VideoGenerationModel: generate(VideoGenerationRequest)
    clips: Clips
    max_prompt_tokens: int
    default_steps: int = DEFAULT_STEPS

    @property
    def pipeline(self) -> Any:
        return self.generation.pipeline

    def prompt_tokens(self, prompt: str) -> int:
        tokenizer = self.pipeline.conditioner.tokenizer
        return len(tokenizer(prompt, add_special_tokens=False)["input_ids"])


def is_video_checkpoint(path: str) -> bool:
    """A folder mlx-vlm generates video from (MiniMax-H3's converted or official layout)."""
    root = Path(path)
    if not ((root / "h3_manifest.json").is_file() or (root / "model_index.json").is_file()):
        return False
    try:
        from mlx_vlm.generate.video_generation import is_video_generation_model
    except ImportError:
        return False
    return bool(is_video_generation_model(path))


def _h3_clips() -> Clips:
    from mlx_vlm.models.minimax_h3 import constants as c
    from mlx_vlm.models.minimax_h3.packing import align_num_frames, resolve_canvas_size

    height, width = resolve_canvas_size(16, 9)  # the pipeline's own default canvas
    longest = int(c.MINIMAX_H3_MAX_DURATION * c.MINIMAX_H3_FPS)
    while align_num_frames(longest) != longest:  # the longest clip it makes
        longest -= 1
    return Clips(
        side_multiple=c.MINIMAX_H3_CANVAS_MULTIPLE,
        max_pixels=c.MINIMAX_H3_MAX_PIXELS,
        max_aspect=c.MINIMAX_H3_MAX_ASPECT_RATIO,
        min_seconds=c.MINIMAX_H3_MIN_DURATION,
        max_seconds=longest / c.MINIMAX_H3_FPS,
        fps=float(c.MINIMAX_H3_FPS),
        default_width=width,
        default_height=height,
    )


def load_video_model(path: str) -> VideoModel:
    """Loads the text-to-video pipeline and puts the paced denoiser in it; raises ValueError
    naming what cannot be served."""
    from mlx_vlm.generate.video_generation import (
        load_video_generation_model,
        video_generation_model_class,
    )

    model_class = video_generation_model_class(path)
    if model_class is None:
        raise ValueError(f"{path} is not a video-generation checkpoint mlx-vlm can load")
    if model_class.model_type != "minimax_h3":
        raise ValueError(
            f"video models of the {model_class.model_type!r} family are not served yet "
            "(served: minimax_h3)"
        )
    generation: Any = load_video_generation_model(path, workflow="t2va")
    pipeline = generation.pipeline
    pipeline.transformer = PacedDenoiser(pipeline.transformer)
    return VideoModel(path, model_class.model_type, generation, _h3_clips(), _max_prompt(path))


def _max_prompt(path: str) -> int:
    """The conditioner's positions (Qwen3-VL's text model), else 4096."""
    root = Path(path)
    for folder in ("conditioner", "text_encoder"):
        config = root / folder / "config.json"
        if config.is_file():
            text = json.loads(config.read_text()).get("text_config", {})
            return int(text.get("max_position_embeddings", 4096))
    return 4096


def fits(clips: Clips, width: int, height: int) -> bool:
    return (
        width > 0
        and height > 0
        and width % clips.side_multiple == 0
        and height % clips.side_multiple == 0
        and width * height <= clips.max_pixels
        and max(width, height) <= clips.max_aspect * min(width, height)
    )
