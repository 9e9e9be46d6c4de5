"""The image-generation families the worker serves, and what each needs beyond mlx-vlm's API.

mlx-vlm loads and runs every family through one interface (`load_image_generation_model`,
`generate_image`). Pacing its loop (worker/images/paced.py) and showing previews need three
facts the interface does not give, so a family is served only where they are known and tested:
- `prepare`: load the text encoder, the denoising transformer and the decoder now (the
  pipelines load some lazily inside the first generation; the paced denoiser must be in place
  before it, and the first request should not pay for a load);
- `preview`: the latents a denoising step starts from, decoded to a picture exactly as the
  pipeline decodes its final latents (uint8, height x width x 3);
- the sizes and step counts its pipeline takes (it raises on others; the gateway checks first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_SIDE = 2048  # pixels: the server's bound on width and height for every family
MAX_STEPS = 100  # the server's bound on denoising steps


@dataclass(frozen=True)
class Family:
    name: str  # mlx-vlm's model type
    prepare: Callable[[Any], None]
    preview: Callable[[Any, Any], Any]
    min_side: int = 16
    side_multiple: int = 16
    min_steps: int = 1  # generation (an edit may take fewer)
    # The prompt's tokens its text encoder reads (the pipeline cuts a longer one silently;
    # the worker refuses it instead).
    max_prompt_tokens: int = 512
    # The denoising steps its loop runs for a request of `steps` (an edit: True).
    denoising_steps: Callable[[int, bool], int] = lambda steps, editing: steps
    # The largest guidance scale the loaded pipeline takes (None: any); its generate raises on
    # a larger one, which the worker refuses up front instead.
    max_guidance: Callable[[Any], float | None] = lambda pipeline: None


def _z_image_prepare(pipeline: Any) -> None:
    pipeline._ensure_components()


def _z_image_preview(pipeline: Any, latents: Any) -> Any:
    images = pipeline._decode_latents(latents[:1])
    return images[0] if images.ndim == 4 else images


def _z_image_max_guidance(pipeline: Any) -> float | None:
    """Turbo is distilled without classifier-free guidance: 0 to 1 (guidance off) only."""
    return 1.0 if pipeline.config.variant == "turbo" else None


def _z_image_steps(steps: int, editing: bool) -> int:
    """Z-Image skips the terminal zero timestep (N requested steps run N - 1); an edit starts
    at Diffusers' img2img index for its strength (0.6, the pipeline's default)."""
    if not editing:
        return steps - 1
    from mlx_vlm.models.z_image.pipeline import _img2img_start_index

    return steps - _img2img_start_index(steps, 0.6)


def _moss_image_prepare(pipeline: Any) -> None:
    from mlx_vlm.models.moss_image.weights import load_text_encoder, load_transformer, load_vae

    if pipeline.text_encoder is None:
        pipeline.text_encoder = load_text_encoder(pipeline.model_path)
    if pipeline.transformer is None:
        pipeline.transformer = load_transformer(pipeline.model_path)
    if pipeline.vae is None:
        pipeline.vae = load_vae(pipeline.model_path)


def _moss_image_preview(pipeline: Any, latents: Any) -> Any:
    import mlx.core as mx

    decoded = pipeline.vae.decode_packed_latents(latents[:1])
    pixels = mx.clip(decoded.transpose(0, 2, 3, 1) / 2 + 0.5, 0, 1) * 255
    return mx.round(pixels).astype(mx.uint8)[0]


FAMILIES: dict[str, Family] = {
    # Z-Image (Tongyi-MAI): Qwen3 text encoder, single-stream DiT, Flux VAE; edits (img2img).
    # Its N requested steps run N - 1 denoising steps, so it takes 2 at least.
    "z_image": Family(
        "z_image",
        _z_image_prepare,
        _z_image_preview,
        min_steps=2,
        denoising_steps=_z_image_steps,
        max_guidance=_z_image_max_guidance,
    ),
    # MOSS-Image (OpenMOSS): Qwen3.5 text encoder, DiT, Flux2 VAE; generation only.
    "moss_image": Family(
        "moss_image", _moss_image_prepare, _moss_image_preview, max_prompt_tokens=4096
    ),
}


def family_for(model_type: str) -> Family:
    family = FAMILIES.get(model_type)
    if family is None:
        raise ValueError(
            f"image models of the {model_type!r} family are not served yet "
            f"(served: {', '.join(sorted(FAMILIES))})"
        )
    return family
