"""Loading an image-generation checkpoint: mlx-vlm's model, its edit side, its family."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.images.families import Family, family_for
from worker.images.paced import PacedDenoiser


@dataclass
class ImageModel:
    path: str
    family: Family
    generation: Any  # mlx-vlm's ImageGenerationModel: generate(ImageGenerationRequest)
    edit: Any | None  # its ImageEditModel on the same pipeline, where the family edits
    default_steps: int
    default_guidance: float
    max_guidance: float | None = None  # the largest guidance scale it takes (None: any)

    @property
    def pipeline(self) -> Any:
        return self.generation.pipeline

    def default_steps_of(self, editing: bool) -> int:
        """The steps a request that names none asks for (an edit has its own default)."""
        if editing and self.edit is not None:
            return int(self.edit.default_sampling.steps)
        return self.default_steps

    def prompt_tokens(self, prompt: str) -> int:
        count = getattr(self.pipeline, "count_prompt_tokens", None)
        return int(count(prompt)) if count is not None else 0


def is_image_checkpoint(path: str) -> bool:
    """A diffusers-style folder (model_index.json) that mlx-vlm generates images with."""
    if not (Path(path) / "model_index.json").is_file():
        return False
    try:
        from mlx_vlm.generate.image import is_image_generation_model
    except ImportError:
        return False
    return bool(is_image_generation_model(path))


def load_image_model(path: str) -> ImageModel:
    """Loads every component now (none is evicted between requests) and puts the paced
    denoiser in the pipeline; raises ValueError naming what cannot be served."""
    from mlx_vlm.generate.edit_image import image_edit_model_class
    from mlx_vlm.generate.image import image_generation_model_class, load_image_generation_model

    model_class = image_generation_model_class(path)
    if model_class is None:
        raise ValueError(f"{path} is not an image-generation checkpoint mlx-vlm can load")
    family = family_for(model_class.model_type)
    generation: Any = load_image_generation_model(path, evict_text_encoder=False)
    if generation.model_type != family.name:  # mlx-vlm picked another class than it named
        raise ValueError(f"{path}: mlx-vlm loads it as {generation.model_type}, not {family.name}")
    pipeline = generation.pipeline
    family.prepare(pipeline)
    pipeline.transformer = PacedDenoiser(pipeline.transformer)
    edit_class = image_edit_model_class(path)
    edit = None
    # (mlx-vlm finds edit classes by any family name in the folder's class names: only this
    # family's own edits this pipeline)
    if edit_class is not None and edit_class.model_type == family.name:
        # the same pipeline, not a second copy of the weights
        edit = edit_class(pipeline=pipeline, model_id=generation.model_id)
    defaults = generation.default_sampling
    return ImageModel(
        path,
        family,
        generation,
        edit,
        int(defaults.steps),
        float(defaults.guidance),
        family.max_guidance(pipeline),
    )
