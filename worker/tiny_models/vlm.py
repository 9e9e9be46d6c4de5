"""A tiny random-weight Qwen2-VL checkpoint in the Hugging Face layout `mlx_vlm.load` reads.

What `Qwen/Qwen2-VL-2B-Instruct` ships, with small dimensions: `config.json` (model_type
"qwen2_vl", a `vision_config` section, mRoPE `rope_scaling` and the vision token ids),
`model.safetensors` with the transformers tensor names (`model.*`, `visual.*`; mlx-vlm's
`sanitize` maps them), the tokenizer files with Qwen2-VL's added tokens (<|vision_start|>,
<|image_pad|>, ...) and its chat template (which renders image parts as
`<|vision_start|><|image_pad|><|vision_end|>`), `preprocessor_config.json`
(Qwen2VLImageProcessor, with a small `max_pixels` so images cost few tokens) and
`generation_config.json`.

The language model follows `worker.tiny_models.text`'s recipe (random N(0, 1/fan_in) weights,
tied embeddings whose rows of added tokens are zero, so a random model practically never ends
on its own: generation lengths are deterministic). The vision tower's output is of the same
order as a token embedding, so different images give different answers.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

from worker.tiny_models.text import decoder_weights, qwen_generation_config
from worker.tiny_models.tokenizer import (
    id_of,
    qwen_tokenizer,
    train_tokenizer,
    write_json,
    write_tokenizer_files,
)

SEED = 0

# The Qwen2-VL-Instruct template as published: a default system turn, and content parts
# rendered in order (images and videos as vision markers around one pad token, which the
# processor expands to the image's number of patches).
QWEN2_VL_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Qwen2-VL's added tokens, in its id order: (content, special), all special.
QWEN2_VL_TOKENS: tuple[tuple[str, bool], ...] = tuple(
    (t, True)
    for t in (
        "<|endoftext|>",
        "<|im_start|>",
        "<|im_end|>",
        "<|object_ref_start|>",
        "<|object_ref_end|>",
        "<|box_start|>",
        "<|box_end|>",
        "<|quad_start|>",
        "<|quad_end|>",
        "<|vision_start|>",
        "<|vision_end|>",
        "<|vision_pad|>",
        "<|image_pad|>",
        "<|video_pad|>",
    )
)

TOKENIZER = qwen_tokenizer(QWEN2_VL_TOKENS, QWEN2_VL_CHAT_TEMPLATE)

# Images are resized to multiples of 28 pixels (patch 14 x merge 2) within these bounds; a
# small ceiling keeps a test image to at most 64 tokens.
MIN_PIXELS = 56 * 56
MAX_PIXELS = 224 * 224

PREPROCESSOR_CONFIG: dict[str, Any] = {
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_processor_type": "Qwen2VLImageProcessor",
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "max_pixels": MAX_PIXELS,
    "merge_size": 2,
    "min_pixels": MIN_PIXELS,
    "patch_size": 14,
    "processor_class": "Qwen2VLProcessor",
    "temporal_patch_size": 2,
}


@dataclass(frozen=True)
class VlmDims:
    """Shape of the language model and of the vision tower."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    vision_depth: int
    vision_dim: int
    vision_heads: int
    vision_mlp_ratio: int  # transformers insists on an int
    max_positions: int = 4096
    max_pixels: int = MAX_PIXELS  # the image processor's ceiling (more pixels: more tokens)
    # Entries the BPE learns, where fewer than the embedding's rows (`vocab`): a padded
    # vocabulary, as a real one's size needs more text than the training corpus has.
    tokenizer_vocab: int | None = None
    # Those rows past the entries zero (as a trained model's are low: greedy decoding never
    # picks them), else random like the others (then they are often picked).
    silent_padding: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


_TINY = VlmDims(
    hidden=128,
    layers=2,
    heads=4,
    kv_heads=2,
    intermediate=256,
    vocab=4096,
    vision_depth=2,
    vision_dim=64,
    vision_heads=4,
    vision_mlp_ratio=2,
)

SIZES: Mapping[str, VlmDims] = {
    # ~1.2M params: loads and answers about a small image in milliseconds.
    "tiny": _TINY,
    # The tiny one with a padded vocabulary, 4,096 embedding rows over a BPE of 2,048 entries
    # (as Qwen's 151,936 rows over 151,665): its random weights often pick a row without text.
    "padded": replace(_TINY, tokenizer_vocab=2048),
    # ~40M: a ViT-S-sized vision tower (21M) and a 20M-class language model, for benchmarks
    # (scripts/bench_vision.py): a 448 x 448 image is 1,024 patches, 256 tokens.
    "bench": VlmDims(
        hidden=384,
        layers=6,
        heads=6,
        kv_heads=2,
        intermediate=1024,
        vocab=8192,
        vision_depth=12,
        vision_dim=384,
        vision_heads=6,
        vision_mlp_ratio=4,
        max_pixels=448 * 448,
    ),
    # Qwen2-VL-2B-Instruct's shapes (2.2B parameters, 8.8 GB in float32): what a real model
    # costs per picture and per token, for speed only (scripts/bench_vision_batch.py
    # --model); built only when asked, never by tests.
    "real": VlmDims(
        hidden=1536,
        layers=28,
        heads=12,
        kv_heads=2,
        intermediate=8960,
        vocab=151936,
        vision_depth=32,
        vision_dim=1280,
        vision_heads=16,
        vision_mlp_ratio=4,
        max_positions=32768,
        max_pixels=448 * 448,
        tokenizer_vocab=8192,
        silent_padding=True,
    ),
}


def mrope_section(half: int) -> list[int]:
    """Qwen-VL's split of the rotary half-dimension between time, height and width (16:24:24
    in the real ones): time gets a quarter, height and width share the rest."""
    section = [half // 4, (half - half // 4) // 2]
    return section + [half - sum(section)]


def vision_token_ids(tid: Any) -> dict[str, int]:
    """The config fields naming Qwen-VL's image, video and vision-marker token ids."""
    return {
        "image_token_id": tid("<|image_pad|>"),
        "video_token_id": tid("<|video_pad|>"),
        "vision_start_token_id": tid("<|vision_start|>"),
        "vision_end_token_id": tid("<|vision_end|>"),
        "vision_token_id": tid("<|vision_pad|>"),
    }


# How Qwen2-VL's and Qwen2.5-VL's towers cut an RGB image: 14 px patches, two frames deep,
# merged 2 x 2 into one token (their `vision_config` fields).
QWEN2_VL_PATCHING: dict[str, int] = {
    "in_chans": 3,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "spatial_patch_size": 14,
    "temporal_patch_size": 2,
}


def qwen2_vl_shared_config(d: VlmDims, tid: Any) -> dict[str, Any]:
    """The config.json fields Qwen2-VL and Qwen2.5-VL share: the Qwen2 language model (flat,
    not nested) and the vision token ids; each adds its architecture, mRoPE and vision tower."""
    return {
        "attention_dropout": 0.0,
        "bos_token_id": tid("<|endoftext|>"),
        "eos_token_id": tid("<|im_end|>"),
        "hidden_act": "silu",
        "hidden_size": d.hidden,
        "initializer_range": 0.02,
        "intermediate_size": d.intermediate,
        "max_position_embeddings": d.max_positions,
        "max_window_layers": d.layers,
        "num_attention_heads": d.heads,
        "num_hidden_layers": d.layers,
        "num_key_value_heads": d.kv_heads,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "sliding_window": d.max_positions,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": d.vocab,
        **vision_token_ids(tid),
    }


def config(d: VlmDims, tid: Any) -> dict[str, Any]:
    section = mrope_section(d.head_dim // 2)
    return {
        **qwen2_vl_shared_config(d, tid),
        "architectures": ["Qwen2VLForConditionalGeneration"],
        "model_type": "qwen2_vl",
        "rope_scaling": {"mrope_section": section, "rope_type": "default", "type": "mrope"},
        "vision_config": {
            "depth": d.vision_depth,
            "embed_dim": d.vision_dim,
            "hidden_size": d.hidden,
            "mlp_ratio": d.vision_mlp_ratio,
            "num_heads": d.vision_heads,
            **QWEN2_VL_PATCHING,
        },
    }


def generation_config(tid: Any) -> dict[str, Any]:

    # Qwen2-VL-Instruct's published defaults.
    return qwen_generation_config(tid, temperature=0.01, top_p=0.001, top_k=1)


# name -> (shape, std | "ones" | "zeros"): what `materialize` turns into tensors.
Specs = dict[str, tuple[tuple[int, ...], float | str]]


def linear(name: str, out: int, inp: int, bias: bool = True, gain: float = 1.0) -> Specs:
    """A linear layer's weight (N(0, gain^2 / fan_in)) and zero bias, PyTorch layout."""
    specs: Specs = {name + ".weight": ((out, inp), gain * inp**-0.5)}
    if bias:
        specs[name + ".bias"] = ((out,), "zeros")
    return specs


def norm(name: str, dim: int, bias: bool = True) -> Specs:
    """A LayerNorm (or, without bias, RMSNorm) at identity: weight ones, bias zeros."""
    specs: Specs = {name + ".weight": ((dim,), "ones")}
    if bias:
        specs[name + ".bias"] = ((dim,), "zeros")
    return specs


def materialize(specs: Specs) -> dict[str, np.ndarray]:
    return {name: _tensor(name, shape, std) for name, (shape, std) in specs.items()}


def qwen_vision_block(prefix: str, dim: int, mlp: int, variant: str) -> Specs:
    """One block of a Qwen vision tower: two norms, fused-qkv attention, then the MLP.

    `variant` "qwen2_vl": LayerNorms, GELU MLP `fc1` / `fc2`; "qwen2_5_vl": RMSNorms, SwiGLU
    MLP `gate_proj` / `up_proj` / `down_proj`; "qwen3_vl" (also Qwen3-Omni's tower):
    LayerNorms, MLP `linear_fc1` / `linear_fc2`.
    """
    layer_norm = variant != "qwen2_5_vl"
    specs = norm(prefix + "norm1", dim, bias=layer_norm) | norm(prefix + "norm2", dim, layer_norm)
    specs |= linear(prefix + "attn.qkv", 3 * dim, dim) | linear(prefix + "attn.proj", dim, dim)
    if variant == "qwen2_5_vl":
        specs |= linear(prefix + "mlp.gate_proj", mlp, dim) | linear(
            prefix + "mlp.up_proj", mlp, dim
        )
        return specs | linear(prefix + "mlp.down_proj", dim, mlp)
    fc = {"qwen2_vl": "mlp.fc", "qwen3_vl": "mlp.linear_fc"}[variant]
    return specs | linear(f"{prefix}{fc}1", mlp, dim) | linear(f"{prefix}{fc}2", dim, mlp)


def qwen_patch_merger(
    prefix: str, merged: int, out: int, norm_dim: int, bias: bool = True
) -> Specs:
    """The patch merger `ln_q` -> `mlp.0` -> GELU -> `mlp.2` that turns 2x2 patches into one
    language-model token (`merged` = 4 x the tower's width; normalized before the 2x2 shuffle
    when `norm_dim` is the tower's width, after it when it is `merged`)."""
    return (
        norm(prefix + "ln_q", norm_dim, bias)
        | linear(prefix + "mlp.0", merged, merged)
        | linear(prefix + "mlp.2", out, merged)
    )


def qwen_vision_weights(d: VlmDims, variant: str) -> dict[str, np.ndarray]:
    """Random float32 weights of a Qwen2-VL ("qwen2_vl") or Qwen2.5-VL ("qwen2_5_vl") vision
    tower, named like transformers' `visual.*`: a 14 px Conv3d patch embedding without bias,
    the blocks (`qwen_vision_block`) and the merger (Qwen2.5-VL's `ln_q` is an RMSNorm)."""
    dim, merged = d.vision_dim, d.vision_dim * 4  # spatial_merge_size 2: 2x2 patches merged
    specs: Specs = {
        # PyTorch Conv3d layout: out, in, time, height, width.
        "visual.patch_embed.proj.weight": ((dim, 3, 2, 14, 14), (3 * 2 * 14 * 14) ** -0.5),
        **qwen_patch_merger("visual.merger.", merged, d.hidden, dim, bias=variant == "qwen2_vl"),
    }
    for i in range(d.vision_depth):
        specs |= qwen_vision_block(f"visual.blocks.{i}.", dim, dim * d.vision_mlp_ratio, variant)
    return materialize(specs)


def _tensor(name: str, shape: tuple[int, ...], std: float | str) -> np.ndarray:
    if std == "ones":
        return np.ones(shape, dtype=np.float32)
    if std == "zeros":
        return np.zeros(shape, dtype=np.float32)
    rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)


def text_weights(
    d: VlmDims, zero_rows: list[int], qk_norm: bool, prefix: str
) -> dict[str, np.ndarray]:
    """The decoder of `worker.tiny_models.text` (Qwen3 layout when `qk_norm`, else Qwen2's
    without attention biases), its `model.` renamed to `prefix`."""

    config = {
        "hidden_size": d.hidden,
        "vocab_size": d.vocab,
        "head_dim": d.head_dim,
        "intermediate_size": d.intermediate,
        "num_attention_heads": d.heads,
        "num_key_value_heads": d.kv_heads,
        "num_hidden_layers": d.layers,
        "model_type": "qwen3" if qk_norm else "qwen2",
        "tie_word_embeddings": True,
    }
    weights = decoder_weights(config, zero_rows=zero_rows)
    return {prefix + k.removeprefix("model."): v for k, v in weights.items()}


def qwen2_text_weights(d: VlmDims, zero_rows: list[int]) -> dict[str, np.ndarray]:
    """Qwen2-VL's and Qwen2.5-VL's language model, `model.*`: the decoder plus Qwen2's
    q/k/v biases (zero here: they only shift the logits)."""
    text = text_weights(d, zero_rows, qk_norm=False, prefix="model.")
    q_out, kv_out = d.heads * d.head_dim, d.kv_heads * d.head_dim
    for i in range(d.layers):
        p = f"model.layers.{i}.self_attn."
        text[p + "q_proj.bias"] = np.zeros(q_out, dtype=np.float32)
        text[p + "k_proj.bias"] = np.zeros(kv_out, dtype=np.float32)
        text[p + "v_proj.bias"] = np.zeros(kv_out, dtype=np.float32)
    return text


def build(arch: object, dims: VlmDims, out_dir: Path) -> int:
    """Write every file of a tiny Qwen2-VL checkpoint into `out_dir`; return its parameters.

    Signature of `worker.tiny_models.arch.Arch.build` (`arch` is unused here)."""
    tok = train_tokenizer(TOKENIZER, dims.tokenizer_vocab or dims.vocab)
    tid = id_of(tok)
    write_tokenizer_files(TOKENIZER, tok, out_dir, model_max_length=dims.max_positions)
    write_json(out_dir / "config.json", config(dims, tid))
    write_json(out_dir / "generation_config.json", generation_config(tid))
    write_json(
        out_dir / "preprocessor_config.json", {**PREPROCESSOR_CONFIG, "max_pixels": dims.max_pixels}
    )
    zero_rows = [tid(content) for content, _ in TOKENIZER.added_tokens]
    if dims.silent_padding:
        zero_rows += range(tok.get_vocab_size(), dims.vocab)
    tensors = {**qwen2_text_weights(dims, zero_rows), **qwen_vision_weights(dims, "qwen2_vl")}
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return sum(t.size for t in tensors.values())
