"""Video generation for `mlx_vlm.generate.video_generation`: MiniMax-H3 (text to video with
sound) in mlx-vlm's converted layout, the folder `mlx_vlm.models.minimax_h3.convert_minimax_h3`
writes from the official checkpoint: `h3_manifest.json` (format, partition, the files'
SHA-256), then `transformer/`, `video_vae/`, `audio_vae/` and `conditioner/` (each a
config.json and model.safetensors with the MLX modules' own parameter names, which mlx-vlm
loads strictly) and `tokenizer/`. The conditioner is Qwen3-VL's text model cut at the 50 layers
whose features the pipeline reads, without its vision tower (`text_only`, the fl2va partition:
text to video).

The weights are MLX's initialisation of the modules at tiny widths (seeded: every build is the
same), with the pipeline's fixed geometry kept (16x spatial and 4x temporal VAE compression,
800 audio samples a latent at 32 kHz), so a 32x32 clip of the shortest length the pipeline makes
(124 frames, 5.2 s at 24 fps, with stereo sound) takes about a second; "medium" is for timing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from worker.tiny_models.tokenizer import train_tokenizer, write_json, write_tokenizer_files

TEXT_LAYERS = 50  # mlx-vlm reads the conditioner's features after this many layers


@dataclass(frozen=True)
class H3Dims:
    dim: int  # the transformer's width (heads x head_dim)
    layers: int
    heads: int
    text_dim: int  # the conditioner's width
    vae_channels: int  # every level of the video VAE's encoder
    audio_decoder_dim: int  # the audio decoder's first width (halved at each upsampling)
    vocab: int = 1024


H3_SIZES: Mapping[str, H3Dims] = {
    "tiny": H3Dims(64, 2, 2, 32, 8, 16),
    # A 512-wide transformer of 8 blocks (~40M parameters): steps that take real time, for
    # timing the server against direct calls (scripts/bench_videos.py).
    "medium": H3Dims(512, 8, 8, 128, 32, 64, vocab=4096),
}


def h3_configs(dims: H3Dims, tid: Any) -> dict[str, dict[str, Any]]:
    """Each component's config.json, by folder."""
    from worker.tiny_models.vlm import SIZES
    from worker.tiny_models.vlm_families import qwen3_vl_config

    transformer = {
        "num_attention_heads": dims.heads,
        "attention_head_dim": dims.dim // dims.heads,
        "hidden_size": dims.dim,
        "num_layers": dims.layers,
        "num_refiner_layers": 1,
        "ffn_dim": dims.dim * 2,
        "text_dim": dims.text_dim,
        "freq_dim": 32,
        "time_embed_hidden_dim": dims.dim,
        "time_embed_dim": dims.dim // 2,
        "rope_freq_dim": 4,  # 3 axes x 2 x 4 = 24 rotary dimensions of the head's 32
    }
    video_vae = {
        "block_out_channels": [dims.vae_channels] * 6,
        "norm_num_groups": 4,
        "decoder_num_layers": 1,
        "decoder_num_attention_heads": 2,
        "decoder_attention_head_dim": 8,
        "latents_mean": [0.0] * 24,
        "latents_std": [1.0] * 24,
    }
    # Three upsamplings of 8 x 10 x 10 = the encoder's hop of 800 samples.
    audio_vae = {
        "encoder_dim": 4,
        "latent_dim": 64,
        "num_attention_heads": 2,
        "decoder_dim": dims.audio_decoder_dim,
        "decoder_rates": [8, 10, 10],
        "decoder_kernel_sizes": [16, 20, 20],
        "resblock_kernel_sizes": [3],
        "resblock_dilation_sizes": [[1]],
    }
    text = replace(
        SIZES["tiny"], hidden=dims.text_dim, layers=TEXT_LAYERS, heads=2, kv_heads=1,
        intermediate=dims.text_dim * 2, vocab=dims.vocab,
    )  # fmt: skip
    conditioner = qwen3_vl_config(text, tid)
    conditioner["text_config"].update(tie_word_embeddings=True, use_final_norm=False)
    conditioner |= {"skip_vision": True, "h3_conditioner_layer": TEXT_LAYERS}
    return {
        "transformer": transformer,
        "video_vae": video_vae,
        "audio_vae": audio_vae,
        "conditioner": conditioner,
    }


def build_minimax_h3(arch: Any, dims: H3Dims, out_dir: Path) -> int:
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_vlm.models.minimax_h3.audio_vae import MiniMaxH3AudioVAE
    from mlx_vlm.models.minimax_h3.config import (
        MiniMaxH3AudioVAEConfig,
        MiniMaxH3TransformerConfig,
        MiniMaxH3VideoVAEConfig,
    )
    from mlx_vlm.models.minimax_h3.transformer import MiniMaxH3Transformer
    from mlx_vlm.models.minimax_h3.visual_vae import MiniMaxH3VideoVAE
    from mlx_vlm.models.qwen3_vl.config import ModelConfig as Qwen3VLConfig
    from mlx_vlm.models.qwen3_vl.qwen3_vl import Model as Qwen3VLModel

    mx.random.seed(0)
    tokenizer = train_tokenizer(arch.tokenizer, dims.vocab)
    (out_dir / "tokenizer").mkdir()
    write_tokenizer_files(arch.tokenizer, tokenizer, out_dir / "tokenizer", 4096)
    configs = h3_configs(dims, tokenizer.token_to_id)
    modules = {
        "transformer": lambda c: MiniMaxH3Transformer(MiniMaxH3TransformerConfig.from_dict(c)),
        "video_vae": lambda c: MiniMaxH3VideoVAE(MiniMaxH3VideoVAEConfig.from_dict(c)),
        "audio_vae": lambda c: MiniMaxH3AudioVAE(MiniMaxH3AudioVAEConfig.from_dict(c)),
        "conditioner": lambda c: Qwen3VLModel(Qwen3VLConfig.from_dict(c)),
    }
    total = 0
    counts = {}
    for name, make in modules.items():
        weights = dict(tree_flatten(make(configs[name]).parameters()))
        folder = out_dir / name
        folder.mkdir()
        write_json(folder / "config.json", configs[name])
        mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
        counts[name] = len(weights)
        total += sum(int(w.size) for w in weights.values())
    files = sorted(p for p in out_dir.rglob("*") if p.is_file())
    manifest = {
        "format": "mlx-vlm-minimax-h3",
        "schema_version": 1,
        "partition": "fl2va",
        "text_only": True,
        "conversion": {"dtype": "float32", "qwen_decoder_layers": TEXT_LAYERS},
        "tensor_counts": counts,
        "sha256": {
            str(p.relative_to(out_dir)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files
        },
    }
    write_json(out_dir / "h3_manifest.json", manifest)
    return total
