"""The tiny image-generation checkpoints (worker/tiny_models/images.py) in their upstream
on-disk layout, read by mlx-vlm's own loaders: each family builds, loads through
`load_image_generation_model`, makes a 64x64 picture that a seed fixes and another seed
changes, decodes to finite values with some variance, and Z-Image edits a PNG. The "real"
sizes are never built here: their configs are checked to give the real models' parameter
counts (modules made lazily, no weights computed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from worker.tiny_models import ensure_checkpoint
from worker.tiny_models.images import MOSS_IMAGE_SIZES, Z_IMAGE_SIZES
from worker.tiny_models.registry import ARCHS

FAMILIES = ["z_image", "moss_image"]
PROMPT = "a red fox in the snow"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, str]:
    cache = tmp_path_factory.mktemp("checkpoints")
    return {family: str(ensure_checkpoint(family, "tiny", cache_dir=cache)) for family in FAMILIES}


@pytest.fixture(scope="module")
def models(checkpoints) -> dict:
    from mlx_vlm.generate.image import load_image_generation_model

    return {family: load_image_generation_model(path) for family, path in checkpoints.items()}


def generate(model, seed: int, steps: int = 3, size: int = 64) -> np.ndarray:
    from mlx_vlm.generate.image import ImageGenerationRequest, generate_image

    request = ImageGenerationRequest(PROMPT, seed=seed, steps=steps, width=size, height=size)
    return np.array(generate_image(model, request).array)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_folder_has_the_upstream_layout(checkpoints, family):
    from safetensors import safe_open
    from transformers import AutoTokenizer

    root = checkpoints[family]
    index = json.loads(Path(root, "model_index.json").read_text())
    assert (
        index["_class_name"]
        == {"z_image": "ZImagePipeline", "moss_image": "MOSSImagePipeline"}[family]
    )
    for part in ("transformer", "text_encoder", "vae"):
        assert "mlx_vlm_format" not in json.loads(Path(root, part, "config.json").read_text())
    with safe_open(f"{root}/text_encoder/model.safetensors", "np") as f:
        prefix = {"z_image": "model.", "moss_image": "language_model."}[family]
        assert all(key.startswith(prefix) for key in f.keys())
    with safe_open(f"{root}/vae/model.safetensors", "np") as f:
        conv = f.get_tensor("decoder.conv_out.weight")
        assert conv.shape == (3, 32, 3, 3)  # PyTorch's OIHW, as diffusers stores it
    tokenizer = AutoTokenizer.from_pretrained(f"{root}/tokenizer", local_files_only=True)
    turn = [{"role": "user", "content": "hi"}]
    text = tokenizer.apply_chat_template(turn, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    off = tokenizer.apply_chat_template(
        turn, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    assert off != text and "<think>" in off


@pytest.mark.parametrize("family", FAMILIES)
def test_a_seed_fixes_the_picture_and_another_changes_it(models, family):
    model = models[family]
    assert model.family == family
    first = generate(model, seed=5)
    assert first.shape == (64, 64, 3) and first.dtype == np.uint8
    assert first.std() > 1.0  # not a constant picture
    assert np.array_equal(first, generate(model, seed=5))
    assert not np.array_equal(first, generate(model, seed=6))
    assert generate(model, seed=5, size=32).shape == (32, 32, 3)


def test_z_image_is_the_turbo_variant(models):
    model = models["z_image"]
    assert model.variant == "turbo"
    assert (model.default_sampling.steps, model.default_sampling.guidance) == (9, 0.0)


@pytest.mark.parametrize("family", FAMILIES)
def test_decoded_values_are_finite_and_vary(models, family):
    import mlx.core as mx

    model = models[family]
    generate(model, seed=1, steps=2)  # the VAE stays loaded after a picture
    vae = model.pipeline.vae
    if family == "z_image":
        latents = mx.random.normal((1, 8, 8, 16), key=mx.random.key(0))
        decoded = np.array(vae.decode(latents))
    else:
        latents = mx.random.normal((1, 128, 4, 4), key=mx.random.key(0))
        decoded = np.array(vae.decode_packed_latents(latents))
    assert np.isfinite(decoded).all()
    assert 0.05 < decoded.std() < 2.0


def test_z_image_edits_a_png(checkpoints, tmp_path):
    from mlx_vlm.generate.edit_image import load_image_edit_model
    from mlx_vlm.generate.image import ImageGenerationRequest, generate_image

    pixels = (np.indices((72, 56)).sum(0) * 3 % 256).astype(np.uint8)
    source = tmp_path / "in.png"
    Image.fromarray(pixels).convert("RGB").save(source)
    model = load_image_edit_model(checkpoints["z_image"])

    def edit(seed: int, **size: int) -> np.ndarray:
        request = ImageGenerationRequest(PROMPT, seed=seed, steps=3, **size)
        result = generate_image(model, request, task="edit", image_paths=[str(source)])
        return np.array(result.array)

    # No size: the source's, rounded down to multiples of 16 (72 high, 56 wide).
    first = edit(4, width=None, height=None)
    assert first.shape == (64, 48, 3) and first.dtype == np.uint8
    assert np.array_equal(first, edit(4, width=None, height=None))
    assert not np.array_equal(first, edit(5, width=None, height=None))
    assert edit(4, width=64, height=32).shape == (32, 64, 3)


def test_the_real_sizes_have_the_real_parameter_counts():
    """Z-Image-Turbo: a 6.15B transformer, Qwen3-4B (4.02B); MOSS-Image: a 5.08B transformer,
    Qwen3.5-9B's text backbone (7.94B, no LM head). Lazily: no weight is computed."""
    from mlx.utils import tree_flatten
    from mlx_vlm.models.moss_image.config import MOSSImageTransformerConfig
    from mlx_vlm.models.moss_image.transformer import MOSSImageTransformer
    from mlx_vlm.models.qwen3_5.config import TextConfig
    from mlx_vlm.models.qwen3_5.language import Qwen3_5Model
    from mlx_vlm.models.z_image.config import ZImageTextEncoderConfig, ZImageTransformerConfig
    from mlx_vlm.models.z_image.text_encoder import ZImageTextEncoder
    from mlx_vlm.models.z_image.transformer import ZImageTransformer

    def billions(module) -> float:
        return round(sum(v.size for _, v in tree_flatten(module.parameters())) / 1e9, 2)

    z = ARCHS["z_image"].config(Z_IMAGE_SIZES["real"], None)
    assert billions(ZImageTransformer(ZImageTransformerConfig.from_dict(z["transformer"]))) == 6.15
    assert billions(ZImageTextEncoder(ZImageTextEncoderConfig.from_dict(z["text_encoder"]))) == 4.02
    assert z["scheduler"]["shift"] <= 3.0  # turbo
    moss = ARCHS["moss_image"].config(MOSS_IMAGE_SIZES["real"], None)
    transformer = MOSSImageTransformer(MOSSImageTransformerConfig.from_dict(moss["transformer"]))
    assert billions(transformer) == 5.08
    text = TextConfig.from_dict(dict(moss["text_encoder"]["text_config"]))
    assert billions(Qwen3_5Model(text)) == 7.94
    for sizes in (Z_IMAGE_SIZES, MOSS_IMAGE_SIZES):
        assert sizes["real"].dtype == "bfloat16" and sizes["tiny"].dtype is None
