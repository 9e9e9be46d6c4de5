"""What mlx-vlm makes when called directly on an image checkpoint: the reference the server's
pictures must equal, pixel for pixel (tests/unit/test_worker_images.py, tests/e2e/test_images.py)."""

from __future__ import annotations

import numpy as np


def direct_picture(
    path: str, prompt: str, seed: int, steps: int, size: int = 64, source: str | None = None
) -> np.ndarray:
    """`generate_image` of a size x size picture, or, with `source` (a picture file), its
    `edit_image` at the picture's own size."""
    from mlx_vlm.generate.edit_image import ImageEditRequest, edit_image, load_image_edit_model
    from mlx_vlm.generate.image import (
        ImageGenerationRequest,
        generate_image,
        load_image_generation_model,
    )

    if source is None:
        model = load_image_generation_model(path)
        request = ImageGenerationRequest(prompt, seed=seed, steps=steps, width=size, height=size)
        return np.array(generate_image(model, request).array)
    edit = ImageEditRequest(prompt, (source,), seed=seed, steps=steps)
    return np.array(edit_image(load_image_edit_model(path), edit).array)
