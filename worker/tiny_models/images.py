"""Image-generation pipelines for `mlx_vlm.generate.image`: Z-Image and MOSS-Image, each a
diffusers-style folder (`model_index.json`, `scheduler/`, `tokenizer/`, and `transformer/`,
`text_encoder/`, `vae/` with a config.json and model.safetensors each) in the layout the
families ship: the tensor names and shapes of the upstream checkpoints (PyTorch OIHW
convolutions, diffusers' `to_out.0`, Qwen's `model.` / `language_model.` prefixes, Qwen3.5's
norms stored minus one), which mlx-vlm's loaders map to its modules. The weights are MLX's own
initialisation of those modules at tiny sizes (seeded: every build is the same), so a 64x64
picture takes well under a second.

Sizes: "tiny" for tests (~1-2M parameters); "medium" (a 512-wide transformer, 55M / 82M
parameters) for timing the server against direct calls where steps take real time
(scripts/bench_images.py); "real", the real models' shapes in bfloat16 shards (Z-Image-Turbo:
a 6.15B transformer and Qwen3-4B, 10.3B, ~21 GB; MOSS-Image: a 5.08B transformer and
Qwen3.5-9B's text backbone, 13.0B, ~26 GB), built only when asked (`python -m
worker.tiny_models --arch z_image --size real`), never by tests; "real-width" (Z-Image, 1.4B)
has the real widths at 2 blocks. Real sizes make each tensor as it is written, so a build
holds about one 2 GB shard in memory, not the model.
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
    """Z-Image's sizes (and what MOSS-Image shares)."""

    dim: int  # the denoising transformer's width
    layers: int  # its blocks
    heads: int
    text_dim: int  # the text encoder's width
    text_layers: int
    vae_channels: tuple[int, ...]  # the VAE's four blocks (8x up / down sampling)
    vocab: int = 1024  # the trained tokenizer's entries
    refiner_layers: int = 1
    text_heads: int = 2
    text_kv_heads: int = 1
    text_ffn: int = 0  # the text encoder's MLP width (0: twice its width)
    text_head_dim: int = 0  # 0: its width over its heads
    text_rows: int = 0  # the embedding's rows, padded as real vocabularies are (0: vocab)
    vae_layers: int = 1  # resnets per VAE block
    shift: float = 3.0  # the scheduler's (Z-Image: <= 3 is the turbo variant)
    dtype: str | None = None  # None: float32 in one file; "bfloat16": made shard by shard


@dataclass(frozen=True)
class MossImageDims(ImageDims):
    """MOSS-Image's: a Qwen3.5 text backbone (Gated DeltaNet layers, full attention every
    `attention_interval`-th) and a transformer MLP `ffn` wide (0: twice its width)."""

    ffn: int = 0
    linear_key_heads: int = 2
    linear_value_heads: int = 2
    linear_head_dim: int = 0  # 0: a quarter of the text width
    attention_interval: int = 2
    mrope: tuple[int, ...] = (2, 1, 1)
    rope_theta: float = 100000


Z_IMAGE_SIZES: Mapping[str, ImageDims] = {
    "tiny": ImageDims(64, 2, 2, 64, 3, (32,) * 4),
    "medium": ImageDims(512, 8, 8, 512, 6, (64,) * 4, vocab=4096),
    # Z-Image-Turbo: the transformer's config defaults (3840 wide, 30 heads, 30 blocks, 2
    # refiners; MLP 10240), Qwen3-4B (36 layers, 2560 wide, 32 / 8 heads of 128, MLP 9728,
    # 151,936 rows), the FLUX.1 VAE (128-512 channels, 2 resnets a block), shift 3 (turbo).
    "real": ImageDims(
        3840, 30, 30, 2560, 36, (128, 256, 512, 512), vocab=4096, refiner_layers=2,
        text_heads=32, text_kv_heads=8, text_ffn=9728, text_head_dim=128, text_rows=151936,
        vae_layers=2, dtype="bfloat16",
    ),
    # Its widths at 2 of its 30 blocks and 2 of the encoder's 36 layers: a step costs what
    # 1/15 of the real one does, with the real layer shapes.
    "real-width": ImageDims(
        3840, 2, 30, 2560, 2, (128, 256, 512, 512), vocab=4096, refiner_layers=2,
        text_heads=32, text_kv_heads=8, text_ffn=9728, text_head_dim=128, vae_layers=2,
        dtype="bfloat16",
    ),
}  # fmt: skip
# MOSS-Image's pipeline skips block 22 in its unconditional pass by default: 23 blocks at least.
MOSS_IMAGE_SIZES: Mapping[str, MossImageDims] = {
    "tiny": MossImageDims(64, 23, 4, 64, 4, (32,) * 4),
    "medium": MossImageDims(512, 23, 8, 512, 4, (64,) * 4, vocab=4096),
    # MOSS-Image: the transformer's config defaults (3072 wide, 24 heads, 42 blocks, MLP
    # 8192), Qwen3.5-9B's text backbone (32 layers, 4096 wide, full attention 16 / 4 heads of
    # 256 every 4th, DeltaNet 16 / 32 heads of 128, MLP 12288, 248,320 rows), the FLUX.2 small
    # decoder (96-384 channels), shift 5.
    "real": MossImageDims(
        3072, 42, 24, 4096, 32, (96, 192, 384, 384), vocab=4096, text_heads=16,
        text_kv_heads=4, text_ffn=12288, text_head_dim=256, text_rows=248320, shift=5.0,
        dtype="bfloat16", ffn=8192, linear_key_heads=16, linear_value_heads=32,
        linear_head_dim=128, attention_interval=4, mrope=(11, 11, 10), rope_theta=10000000,
    ),
}  # fmt: skip
SHARD_BYTES = 2 << 30


def _tokenizer(out_dir: Path, dims: ImageDims) -> None:
    folder = out_dir / "tokenizer"
    folder.mkdir()
    write_tokenizer_files(QWEN2, train_tokenizer(QWEN2, dims.vocab), folder, 4096)


def _parameters(module: Any) -> Weights:
    from mlx.utils import tree_flatten

    return dict(tree_flatten(module.parameters()))


def _write(folder: Path, weights: Weights, config: dict[str, Any], dtype: str | None = None) -> int:
    """Writes `weights` (emptying it) with `config`: one float32 file, or `dtype` shards."""
    import mlx.core as mx

    folder.mkdir()
    write_json(folder / "config.json", config)
    total = sum(int(w.size) for w in weights.values())
    if dtype is None:
        mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "pt"})
        return total
    # Each (lazy) tensor is made and cast as it joins a shard, and freed once that is written.
    shards: list[list[str]] = []
    shard: Weights = {}
    size = 0
    for key in list(weights):
        shard[key] = weights.pop(key).astype(getattr(mx, dtype))
        mx.eval(shard[key])
        size += shard[key].nbytes
        if size >= SHARD_BYTES or not weights:
            part = folder / f"part-{len(shards)}.safetensors"
            mx.save_safetensors(str(part), shard, metadata={"format": "pt"})
            shards.append(list(shard))
            shard, size = {}, 0
    weight_map: dict[str, str] = {}
    for i, keys in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        (folder / f"part-{i}.safetensors").rename(folder / name)
        weight_map |= dict.fromkeys(keys, name)
    index = {"metadata": {"total_size": total * getattr(mx, dtype).size}, "weight_map": weight_map}
    write_json(folder / "model.safetensors.index.json", index)
    return total


def _diffusers_vae(weights: Weights, keep: Callable[[str], bool] = lambda _: True) -> Weights:
    """MLX VAE parameters in diffusers' layout: OIHW convolutions, `to_out.0`."""
    return {
        key.replace(".to_out.", ".to_out.0."): (w.transpose(0, 3, 1, 2) if w.ndim == 4 else w)
        for key, w in weights.items()
        if keep(key)
    }


def z_image_configs(dims: ImageDims) -> dict[str, dict[str, Any]]:
    """Each component's config.json, and the scheduler's, as Tongyi-MAI's folders spell them."""
    head = dims.dim // dims.heads
    transformer = {
        "_class_name": "ZImageTransformer2DModel",
        "dim": dims.dim,
        "n_heads": dims.heads,
        "n_kv_heads": dims.heads,
        "n_layers": dims.layers,
        "n_refiner_layers": dims.refiner_layers,
        "cap_feat_dim": dims.text_dim,
        "in_channels": 16,
        "all_patch_size": [2],
        "all_f_patch_size": [1],
        "axes_dims": [head // 4, 3 * head // 8, 3 * head // 8],
        "rope_theta": 256.0,
        "t_scale": 1000.0,
    }
    text = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": dims.text_rows or dims.vocab,
        "hidden_size": dims.text_dim,
        "num_hidden_layers": dims.text_layers,
        "num_attention_heads": dims.text_heads,
        "num_key_value_heads": dims.text_kv_heads,
        "head_dim": dims.text_head_dim or dims.text_dim // dims.text_heads,
        "intermediate_size": dims.text_ffn or dims.text_dim * 2,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 4096,
    }
    vae = {
        "_class_name": "AutoencoderKL",
        "in_channels": 3,
        "out_channels": 3,
        "latent_channels": 16,
        "block_out_channels": list(dims.vae_channels),
        "layers_per_block": dims.vae_layers,
        "scaling_factor": 0.3611,
        "shift_factor": 0.1159,
    }
    scheduler = {"_class_name": "FlowMatchEulerDiscreteScheduler", "shift": dims.shift}
    return {"transformer": transformer, "text_encoder": text, "vae": vae, "scheduler": scheduler}


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
    configs = z_image_configs(dims)
    # (No module is kept in a variable: a real size's tensors are made one at a time.)
    weights = {_z_upstream(k): w for k, w in _parameters(
        ZImageTransformer(ZImageTransformerConfig.from_dict(configs["transformer"]))
    ).items()}  # fmt: skip
    total = _write(out_dir / "transformer", weights, configs["transformer"], dims.dtype)
    weights = {f"model.{k}": w for k, w in _parameters(
        ZImageTextEncoder(ZImageTextEncoderConfig.from_dict(configs["text_encoder"]))
    ).items()}  # fmt: skip
    total += _write(out_dir / "text_encoder", weights, configs["text_encoder"], dims.dtype)
    vae = ZImageVAE(ZImageVAEConfig.from_dict(configs["vae"]))
    total += _write(out_dir / "vae", _diffusers_vae(_parameters(vae)), configs["vae"])
    _pipeline_files(out_dir, "ZImagePipeline", configs["scheduler"])
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


def moss_image_configs(dims: MossImageDims) -> dict[str, dict[str, Any]]:
    """Each component's config.json, and the scheduler's, as OpenMOSS's folders spell them."""
    transformer = {
        "_class_name": "MOSSImageTransformer",
        "dim": dims.dim,
        "ffn_dim": dims.ffn or dims.dim * 2,
        "num_heads": dims.heads,
        "num_layers": dims.layers,
        "text_dim": dims.text_dim,
        "freq_dim": 256,
        "latent_channels": 128,
    }
    linear_head = dims.linear_head_dim or dims.text_dim // 4
    text = {
        "model_type": "qwen3_5_text",
        "hidden_size": dims.text_dim,
        "intermediate_size": dims.text_ffn or dims.text_dim * 2,
        "linear_num_value_heads": dims.linear_value_heads,
        "linear_num_key_heads": dims.linear_key_heads,
        "linear_key_head_dim": linear_head,
        "linear_value_head_dim": linear_head,
        "linear_conv_kernel_dim": 4,
        "num_hidden_layers": dims.text_layers,
        "num_attention_heads": dims.text_heads,
        "num_key_value_heads": dims.text_kv_heads,
        "head_dim": dims.text_head_dim or dims.text_dim // dims.text_heads,
        "rms_norm_eps": 1e-6,
        "vocab_size": dims.text_rows or dims.vocab,
        "max_position_embeddings": 4096,
        "full_attention_interval": dims.attention_interval,
        "rope_parameters": {
            "type": "default", "mrope_section": list(dims.mrope), "rope_theta": dims.rope_theta,
            "partial_rotary_factor": 0.25,
        },
    }  # fmt: skip
    return {
        "transformer": transformer,
        "text_encoder": {"model_type": "qwen3_5", "text_config": text},
        "vae": {"decoder_block_out_channels": list(dims.vae_channels)},
        "scheduler": {"num_train_timesteps": 1000, "shift": dims.shift},
    }


def build_moss_image(arch: object, dims: MossImageDims, out_dir: Path) -> int:
    import mlx.core as mx
    from mlx_vlm.models.flux2.vae import Flux2VAE
    from mlx_vlm.models.moss_image.config import MOSSImageTransformerConfig
    from mlx_vlm.models.moss_image.transformer import MOSSImageTransformer
    from mlx_vlm.models.qwen3_5.config import TextConfig
    from mlx_vlm.models.qwen3_5.language import Qwen3_5Model

    mx.random.seed(0)
    _tokenizer(out_dir, dims)
    configs = moss_image_configs(dims)
    weights = {k.replace("time_embedding.layers.", "time_embedding."): w for k, w in _parameters(
        MOSSImageTransformer(MOSSImageTransformerConfig.from_dict(configs["transformer"]))
    ).items()}  # fmt: skip
    total = _write(out_dir / "transformer", weights, configs["transformer"], dims.dtype)
    text = configs["text_encoder"]
    weights = {f"language_model.{k}": _moss_upstream(k, w) for k, w in _parameters(
        Qwen3_5Model(TextConfig.from_dict(dict(text["text_config"])))
    ).items()}  # fmt: skip
    total += _write(out_dir / "text_encoder", weights, text, dims.dtype)
    # The loader reads the decoder alone (upstream's folder has the encoder as well).
    vae = Flux2VAE(decoder_block_out_channels=tuple(dims.vae_channels))
    decoding = ("decoder.", "post_quant_conv.", "bn.")
    weights = _diffusers_vae(_parameters(vae), lambda k: k.startswith(decoding))
    total += _write(out_dir / "vae", weights, configs["vae"])
    _pipeline_files(out_dir, "MOSSImagePipeline", configs["scheduler"])
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
