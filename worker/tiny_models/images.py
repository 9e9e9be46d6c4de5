"""Image-generation pipelines for `mlx_vlm.generate.image`: Z-Image and MOSS-Image, each a
diffusers-style folder (`model_index.json`, `scheduler/`, `tokenizer/`, and `transformer/`,
`text_encoder/`, `vae/` with a config.json and model.safetensors each) in the layout the
families ship: the tensor names and shapes of the upstream checkpoints (PyTorch OIHW
convolutions, diffusers' `to_out.0`, Qwen's `model.` / `language_model.` prefixes, Qwen3.5's
norms stored minus one), which mlx-vlm's loaders map to its modules. The weights are MLX's own
initialisation of those modules at tiny sizes (seeded: every build is the same), so a 64x64
picture takes well under a second.

Sizes: "tiny" for tests; "medium" (a 512-wide transformer, ~0.1-0.2B parameters) for timing
the server against direct calls where steps take real time (scripts/bench_images.py). The real
models (Z-Image-Turbo: a 6B transformer and a 4B text encoder) do not fit this machine's
memory and time; their shapes are the families' config defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.tiny_models.tokenizer import QWEN2, train_tokenizer, write_json, write_tokenizer_files

Weights = dict[str, Any]  # name -> mx.array


@dataclass(frozen=True)
class ImageDims:
    dim: int  # the denoising transformer's width
    layers: int  # its blocks
    heads: int
    text_dim: int  # the text encoder's width
    text_layers: int
    vae_channels: int  # every VAE block's channels (four blocks: 8x up / down sampling)
    vocab: int = 1024


Z_IMAGE_SIZES: Mapping[str, ImageDims] = {
    "tiny": ImageDims(dim=64, layers=2, heads=2, text_dim=64, text_layers=3, vae_channels=32),
    "medium": ImageDims(
        dim=512, layers=8, heads=8, text_dim=512, text_layers=6, vae_channels=64, vocab=4096
    ),
}
# MOSS-Image's pipeline skips block 22 in its unconditional pass by default: 23 blocks at least.
MOSS_IMAGE_SIZES: Mapping[str, ImageDims] = {
    "tiny": ImageDims(dim=64, layers=23, heads=4, text_dim=64, text_layers=4, vae_channels=32),
    "medium": ImageDims(
        dim=512, layers=23, heads=8, text_dim=512, text_layers=4, vae_channels=64, vocab=4096
    ),
}


def _tokenizer(out_dir: Path, dims: ImageDims) -> None:
    folder = out_dir / "tokenizer"
    folder.mkdir()
    write_tokenizer_files(QWEN2, train_tokenizer(QWEN2, dims.vocab), folder, 4096)


def _parameters(module: Any) -> Weights:
    from mlx.utils import tree_flatten

    return dict(tree_flatten(module.parameters()))


def _write(folder: Path, weights: Weights, config: dict[str, Any]) -> int:
    import mlx.core as mx

    folder.mkdir()
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "pt"})
    write_json(folder / "config.json", config)
    return sum(int(w.size) for w in weights.values())


def _diffusers_vae(weights: Weights, keep: Callable[[str], bool] = lambda _: True) -> Weights:
    """MLX VAE parameters in diffusers' layout: OIHW convolutions, `to_out.0`."""
    return {
        key.replace(".to_out.", ".to_out.0."): (w.transpose(0, 3, 1, 2) if w.ndim == 4 else w)
        for key, w in weights.items()
        if keep(key)
    }


def _qwen_text_config(dims: ImageDims) -> dict[str, Any]:
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": dims.vocab,
        "hidden_size": dims.text_dim,
        "num_hidden_layers": dims.text_layers,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": dims.text_dim // 2,
        "intermediate_size": dims.text_dim * 2,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 4096,
    }


def build_z_image(arch: object, dims: ImageDims, out_dir: Path) -> int:
    import mlx.core as mx
    from mlx_vlm.models.z_image.config import (
        ZImageTextEncoderConfig,
        ZImageTransformerConfig,
        ZImageVAEConfig,
    )
    from mlx_vlm.models.z_image.text_encoder import ZImageTextEncoder
    from mlx_vlm.models.z_image.transformer import ZImageTransformer
    from mlx_vlm.models.z_image.vae import ZImageVAE

    mx.random.seed(0)
    _tokenizer(out_dir, dims)
    head = dims.dim // dims.heads
    transformer = {
        "_class_name": "ZImageTransformer2DModel",
        "dim": dims.dim,
        "n_heads": dims.heads,
        "n_kv_heads": dims.heads,
        "n_layers": dims.layers,
        "n_refiner_layers": 1,
        "cap_feat_dim": dims.text_dim,
        "in_channels": 16,
        "all_patch_size": [2],
        "all_f_patch_size": [1],
        "axes_dims": [head // 4, 3 * head // 8, 3 * head // 8],
        "rope_theta": 256.0,
        "t_scale": 1000.0,
    }
    weights = {_z_upstream(k): w for k, w in _parameters(
        ZImageTransformer(ZImageTransformerConfig.from_dict(transformer))
    ).items()}  # fmt: skip
    total = _write(out_dir / "transformer", weights, transformer)
    text = _qwen_text_config(dims)
    encoder = ZImageTextEncoder(ZImageTextEncoderConfig.from_dict(text))
    total += _write(
        out_dir / "text_encoder", {f"model.{k}": w for k, w in _parameters(encoder).items()}, text
    )
    vae = {
        "_class_name": "AutoencoderKL",
        "in_channels": 3,
        "out_channels": 3,
        "latent_channels": 16,
        "block_out_channels": [dims.vae_channels] * 4,
        "layers_per_block": 1,
        "scaling_factor": 0.3611,
        "shift_factor": 0.1159,
    }
    total += _write(
        out_dir / "vae", _diffusers_vae(_parameters(ZImageVAE(ZImageVAEConfig.from_dict(vae)))), vae
    )
    _pipeline_files(
        out_dir, "ZImagePipeline", {"_class_name": "FlowMatchEulerDiscreteScheduler", "shift": 3.0}
    )
    return total


def _z_upstream(key: str) -> str:
    """An MLX Z-Image transformer name as Tongyi-MAI's checkpoint spells it."""
    if key.startswith("final_layer."):
        key = "all_final_layer.2-1." + key[len("final_layer.") :]
        key = key.replace("adaLN_modulation.0.", "adaLN_modulation.1.")
    elif key.startswith("x_embedder."):
        key = "all_x_embedder.2-1." + key[len("x_embedder.") :]
    key = key.replace("t_embedder.linear1.", "t_embedder.mlp.0.")
    return key.replace("t_embedder.linear2.", "t_embedder.mlp.2.")


def build_moss_image(arch: object, dims: ImageDims, out_dir: Path) -> int:
    import mlx.core as mx
    from mlx_vlm.models.flux2.vae import Flux2VAE
    from mlx_vlm.models.moss_image.config import MOSSImageTransformerConfig
    from mlx_vlm.models.moss_image.transformer import MOSSImageTransformer
    from mlx_vlm.models.qwen3_5.config import TextConfig
    from mlx_vlm.models.qwen3_5.language import Qwen3_5Model

    mx.random.seed(0)
    _tokenizer(out_dir, dims)
    transformer = {
        "_class_name": "MOSSImageTransformer",
        "dim": dims.dim,
        "ffn_dim": dims.dim * 2,
        "num_heads": dims.heads,
        "num_layers": dims.layers,
        "text_dim": dims.text_dim,
        "freq_dim": 256,
        "latent_channels": 128,
    }
    module = MOSSImageTransformer(MOSSImageTransformerConfig.from_dict(transformer))
    weights = {
        k.replace("time_embedding.layers.", "time_embedding."): w
        for k, w in _parameters(module).items()
    }
    total = _write(out_dir / "transformer", weights, transformer)
    text = {
        "model_type": "qwen3_5_text",
        "hidden_size": dims.text_dim,
        "intermediate_size": dims.text_dim * 2,
        "linear_num_value_heads": 2,
        "linear_num_key_heads": 2,
        "linear_key_head_dim": dims.text_dim // 4,
        "linear_value_head_dim": dims.text_dim // 4,
        "linear_conv_kernel_dim": 4,
        "num_hidden_layers": dims.text_layers,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": dims.text_dim // 2,
        "rms_norm_eps": 1e-6,
        "vocab_size": dims.vocab,
        "max_position_embeddings": 4096,
        "full_attention_interval": 2,
        "rope_parameters": {
            "type": "default", "mrope_section": [2, 1, 1], "rope_theta": 100000,
            "partial_rotary_factor": 0.25,
        },
    }  # fmt: skip
    encoder = _parameters(Qwen3_5Model(TextConfig.from_dict(text)))
    total += _write(
        out_dir / "text_encoder",
        {f"language_model.{k}": _moss_upstream(k, w) for k, w in encoder.items()},
        {"model_type": "qwen3_5", "text_config": text},
    )
    channels = [dims.vae_channels] * 4
    vae = Flux2VAE(decoder_block_out_channels=tuple(channels))
    decoding = ("decoder.", "post_quant_conv.", "bn.")
    total += _write(
        out_dir / "vae",
        _diffusers_vae(_parameters(vae), lambda k: k.startswith(decoding)),
        {"decoder_block_out_channels": channels},
    )
    _pipeline_files(out_dir, "MOSSImagePipeline", {"num_train_timesteps": 1000, "shift": 3.0})
    return total


def _moss_upstream(key: str, w: Any) -> Any:
    """A Qwen3.5 parameter as the upstream checkpoint stores it: its norms minus one, its
    convolutions (channels, 1, kernel)."""
    if key.endswith("conv1d.weight"):
        return w.moveaxis(1, 2)
    offset = (".input_layernorm.weight", ".post_attention_layernorm.weight", ".q_norm.weight",
              ".k_norm.weight")  # fmt: skip
    if key == "norm.weight" or key.endswith(offset):
        return w - 1.0
    return w


def _pipeline_files(out_dir: Path, pipeline: str, scheduler: dict[str, Any]) -> None:
    write_json(out_dir / "model_index.json", {"_class_name": pipeline})
    (out_dir / "scheduler").mkdir()
    write_json(out_dir / "scheduler" / "scheduler_config.json", scheduler)
