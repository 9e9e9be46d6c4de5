"""A tiny random-weight Qwen2-VL checkpoint in the Hugging Face layout `mlx_vlm.load` reads.

What `Qwen/Qwen2-VL-2B-Instruct` ships, with small dimensions: `config.json` (model_type
"qwen2_vl", a `vision_config` section, mRoPE `rope_scaling` and the vision token ids),
`model.safetensors` with the transformers tensor names (`model.*`, `visual.*`; mlx-vlm's
`sanitize` maps them), the tokenizer files with Qwen2-VL's added tokens (<|vision_start|>,
<|image_pad|>, ...) and its chat template (which renders image parts as
`<|vision_start|><|image_pad|><|vision_end|>`), `preprocessor_config.json`
(Qwen2VLImageProcessor, with a small `max_pixels` so images cost few tokens) and
`generation_config.json`.

The language model follows `scripts.tiny_checkpoint`'s recipe (random N(0, 1/fan_in) weights,
tied embeddings whose rows of added tokens are zero, so a random model practically never ends
on its own: generation lengths are deterministic). The vision tower's output is of the same
order as a token embedding, so different images give different answers.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

from scripts.tiny_tokenizer import (
    QWEN2,
    TokenizerSpec,
    train_tokenizer,
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

# Qwen2-VL's added tokens, in its id order (all special).
_VL_TOKENS = (
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

TOKENIZER = TokenizerSpec(
    pretokenize_regex=QWEN2.pretokenize_regex,
    nfc=True,
    added_tokens=tuple((t, True) for t in _VL_TOKENS),
    bos_token=None,
    eos_token="<|im_end|>",
    pad_token="<|endoftext|>",
    additional_special_tokens=_VL_TOKENS[1:],
    chat_template=QWEN2_VL_CHAT_TEMPLATE,
    tokenizer_class="Qwen2Tokenizer",
    post_processor_adds_bos=False,
    extra_config=dict(QWEN2.extra_config),
)

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

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


SIZES: Mapping[str, VlmDims] = {
    # ~1.2M params: loads and answers about a small image in milliseconds.
    "tiny": VlmDims(
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
    ),
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
}


def config(d: VlmDims, tid: Any) -> dict[str, Any]:
    half = d.head_dim // 2
    # Qwen2-VL splits the rotary half-dimension 16:24:24 between time, height and width.
    section = [half // 4, (half - half // 4) // 2]
    section.append(half - sum(section))
    return {
        "architectures": ["Qwen2VLForConditionalGeneration"],
        "attention_dropout": 0.0,
        "bos_token_id": tid("<|endoftext|>"),
        "eos_token_id": tid("<|im_end|>"),
        "hidden_act": "silu",
        "hidden_size": d.hidden,
        "image_token_id": tid("<|image_pad|>"),
        "initializer_range": 0.02,
        "intermediate_size": d.intermediate,
        "max_position_embeddings": d.max_positions,
        "max_window_layers": d.layers,
        "model_type": "qwen2_vl",
        "num_attention_heads": d.heads,
        "num_hidden_layers": d.layers,
        "num_key_value_heads": d.kv_heads,
        "rms_norm_eps": 1e-06,
        "rope_scaling": {"mrope_section": section, "rope_type": "default", "type": "mrope"},
        "rope_theta": 1000000.0,
        "sliding_window": d.max_positions,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "use_cache": True,
        "use_sliding_window": False,
        "video_token_id": tid("<|video_pad|>"),
        "vision_config": {
            "depth": d.vision_depth,
            "embed_dim": d.vision_dim,
            "hidden_size": d.hidden,
            "in_chans": 3,
            "mlp_ratio": d.vision_mlp_ratio,
            "num_heads": d.vision_heads,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "spatial_patch_size": 14,
            "temporal_patch_size": 2,
        },
        "vision_end_token_id": tid("<|vision_end|>"),
        "vision_start_token_id": tid("<|vision_start|>"),
        "vision_token_id": tid("<|vision_pad|>"),
        "vocab_size": d.vocab,
    }


def generation_config(tid: Any) -> dict[str, Any]:
    # Qwen2-VL-Instruct's published defaults.
    return {
        "bos_token_id": tid("<|endoftext|>"),
        "do_sample": True,
        "eos_token_id": [tid("<|im_end|>"), tid("<|endoftext|>")],
        "pad_token_id": tid("<|endoftext|>"),
        "temperature": 0.01,
        "top_k": 1,
        "top_p": 0.001,
    }


def vision_weights(d: VlmDims) -> dict[str, np.ndarray]:
    """Random float32 weights of the vision tower, named like transformers' `visual.*`."""
    dim, merged = d.vision_dim, d.vision_dim * 4  # spatial_merge_size 2: 2x2 patches merged
    mlp = dim * d.vision_mlp_ratio
    patch_in = 3 * 2 * 14 * 14
    specs: dict[str, tuple[tuple[int, ...], float | str]] = {
        # PyTorch Conv3d layout: out, in, time, height, width.
        "visual.patch_embed.proj.weight": ((dim, 3, 2, 14, 14), patch_in**-0.5),
        "visual.merger.ln_q.weight": ((dim,), "ones"),
        "visual.merger.ln_q.bias": ((dim,), "zeros"),
        "visual.merger.mlp.0.weight": ((merged, merged), merged**-0.5),
        "visual.merger.mlp.0.bias": ((merged,), "zeros"),
        "visual.merger.mlp.2.weight": ((d.hidden, merged), merged**-0.5),
        "visual.merger.mlp.2.bias": ((d.hidden,), "zeros"),
    }
    for i in range(d.vision_depth):
        p = f"visual.blocks.{i}."
        specs |= {
            p + "norm1.weight": ((dim,), "ones"),
            p + "norm1.bias": ((dim,), "zeros"),
            p + "norm2.weight": ((dim,), "ones"),
            p + "norm2.bias": ((dim,), "zeros"),
            p + "attn.qkv.weight": ((3 * dim, dim), dim**-0.5),
            p + "attn.qkv.bias": ((3 * dim,), "zeros"),
            p + "attn.proj.weight": ((dim, dim), dim**-0.5),
            p + "attn.proj.bias": ((dim,), "zeros"),
            p + "mlp.fc1.weight": ((mlp, dim), dim**-0.5),
            p + "mlp.fc1.bias": ((mlp,), "zeros"),
            p + "mlp.fc2.weight": ((dim, mlp), mlp**-0.5),
            p + "mlp.fc2.bias": ((dim,), "zeros"),
        }
    return {name: _tensor(name, shape, std) for name, (shape, std) in specs.items()}


def _tensor(name: str, shape: tuple[int, ...], std: float | str) -> np.ndarray:
    if std == "ones":
        return np.ones(shape, dtype=np.float32)
    if std == "zeros":
        return np.zeros(shape, dtype=np.float32)
    rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)


def build(arch: object, dims: VlmDims, out_dir: Path) -> int:
    """Write every file of a tiny Qwen2-VL checkpoint into `out_dir`; return its parameters.

    Signature of `scripts.tiny_checkpoint.Arch.build` (`arch` is unused here)."""
    # Imported here: scripts.tiny_checkpoint imports this module.
    from scripts.tiny_checkpoint import decoder_weights

    tok = train_tokenizer(TOKENIZER, dims.vocab)
    tid = tok.token_to_id
    write_tokenizer_files(TOKENIZER, tok, out_dir, model_max_length=dims.max_positions)
    cfg = config(dims, tid)
    _write_json(out_dir / "config.json", cfg)
    _write_json(out_dir / "generation_config.json", generation_config(tid))
    _write_json(
        out_dir / "preprocessor_config.json", {**PREPROCESSOR_CONFIG, "max_pixels": dims.max_pixels}
    )
    added_ids = [tid(content) for content, _ in TOKENIZER.added_tokens]
    text = decoder_weights({**cfg, "head_dim": dims.head_dim}, zero_rows=added_ids)
    # Qwen2 attention has biases on q, k and v (zero here: they only shift the logits).
    q_out, kv_out = dims.heads * dims.head_dim, dims.kv_heads * dims.head_dim
    for i in range(dims.layers):
        p = f"model.layers.{i}.self_attn."
        text[p + "q_proj.bias"] = np.zeros(q_out, dtype=np.float32)
        text[p + "k_proj.bias"] = np.zeros(kv_out, dtype=np.float32)
        text[p + "v_proj.bias"] = np.zeros(kv_out, dtype=np.float32)
    tensors = {**text, **vision_weights(dims)}
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return sum(t.size for t in tensors.values())


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
