"""A tiny random-weight Qwen3-Omni (thinker only: text out) in the layout `mlx_vlm.load` reads.

What `Qwen/Qwen3-Omni-30B-A3B-Thinking` ships, with small dimensions: `config.json`
(model_type "qwen3_omni_moe", `enable_audio_output` false, a `thinker_config` holding the
`text_config` (a Qwen3 MoE with interleaved mRoPE), `vision_config` (deepstack mergers) and
`audio_config` (the Whisper-style conv + transformer audio encoder), plus the talker and
code2wav sections the transformers config always writes), `model.safetensors` with the
transformers tensor names (`thinker.model.*`, `thinker.lm_head.*`, `thinker.visual.*`,
`thinker.audio_tower.*`; PyTorch conv layouts, per-expert MoE weights: mlx-vlm's `sanitize`
maps them), the tokenizer files with Qwen3-Omni's added tokens (<|audio_start|>,
<|audio_pad|>, ...) and named media tokens (`image_token`, `audio_token`, ... which mlx-vlm's
`Qwen3OmniMoeProcessor` reads off the tokenizer), a chat template rendering audio parts as
`<|audio_start|><|audio_pad|><|audio_end|>`, `preprocessor_config.json` (the 128-bin
WhisperFeatureExtractor and the Qwen-VL image settings, small `max_pixels`) and
`generation_config.json`.

The language model follows `worker.tiny_models.text`'s recipe (random N(0, 1/fan_in) weights,
output rows of every added token zero, so a random model practically never ends on its own).
The audio and vision towers end in projections whose output is of the order of a token
embedding, so different audio (or images) give different answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from safetensors.numpy import save_file

from worker.tiny_models.omni_talker import talker_config, talker_tensors
from worker.tiny_models.text import LOGIT_STD, RESIDUAL_GAIN, qwen_generation_config
from worker.tiny_models.tokenizer import (
    QWEN3_CHAT_TEMPLATE,
    id_of,
    qwen_tokenizer,
    train_tokenizer,
    write_json,
    write_tokenizer_files,
)
from worker.tiny_models.vlm import (
    Specs,
    linear,
    materialize,
    norm,
    qwen_patch_merger,
    qwen_vision_block,
)
from worker.tiny_models.vlm_families import QWEN3_VL_TOKENS

# Qwen3-Omni's added tokens in its id order (151643...151675 in the real vocabulary): Qwen3-VL's
# (chat markers and vision tokens special, tool and think tags not), then the audio ones.
_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    *QWEN3_VL_TOKENS,
    ("<|audio_start|>", True),
    ("<|audio_end|>", True),
    ("<tts_pad>", True),
    ("<tts_text_bos>", True),
    ("<tts_text_eod>", True),
    ("<tts_text_bos_single>", True),
    ("<|audio_pad|>", True),
)

# Named media tokens: transformers sets them as tokenizer attributes (tokenizer.audio_token).
_MEDIA_TOKENS = {
    "audio_bos_token": "<|audio_start|>",
    "audio_eos_token": "<|audio_end|>",
    "audio_token": "<|audio_pad|>",
    "image_token": "<|image_pad|>",
    "video_token": "<|video_pad|>",
    "vision_bos_token": "<|vision_start|>",
    "vision_eos_token": "<|vision_end|>",
}

# The Qwen3 template (tools, <think>, tool responses) with Qwen3-Omni's rendering of content
# parts: text in order, images / audio / video as their marker triples, which the processor
# expands to the media's number of tokens.
_STRING_CONTENT = """    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
"""
_PARTS_CONTENT = """    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set parts = namespace(text='') %}
        {%- for item in message.content %}
            {%- if item.type == 'image' or 'image' in item or 'image_url' in item %}
                {%- set parts.text = parts.text + '<|vision_start|><|image_pad|><|vision_end|>' %}
            {%- elif item.type == 'audio' or 'audio' in item or 'audio_url' in item %}
                {%- set parts.text = parts.text + '<|audio_start|><|audio_pad|><|audio_end|>' %}
            {%- elif item.type == 'video' or 'video' in item %}
                {%- set parts.text = parts.text + '<|vision_start|><|video_pad|><|vision_end|>' %}
            {%- elif item.type == 'text' %}
                {%- set parts.text = parts.text + item.text %}
            {%- endif %}
        {%- endfor %}
        {%- set content = parts.text %}
    {%- endif %}
"""
if _STRING_CONTENT not in QWEN3_CHAT_TEMPLATE:
    raise RuntimeError("the Qwen3 template changed: update omni.py's content rendering")
QWEN3_OMNI_CHAT_TEMPLATE = QWEN3_CHAT_TEMPLATE.replace(_STRING_CONTENT, _PARTS_CONTENT)

TOKENIZER = qwen_tokenizer(
    _ADDED_TOKENS,
    QWEN3_OMNI_CHAT_TEMPLATE,
    **_MEDIA_TOKENS,
    extra_special_tokens=dict(_MEDIA_TOKENS),
)

N_MELS = 128  # Qwen3-Omni's audio encoder takes 128-bin log-mel features
SAMPLE_RATE = 16000
# Images are resized to multiples of 32 pixels (patch 16 x merge 2) within these bounds.
MIN_PIXELS = 64 * 64
MAX_PIXELS = 192 * 192

PREPROCESSOR_CONFIG: dict[str, Any] = {
    # The audio half: Whisper's log-mel front end, 128 bins, 300 s windows.
    "chunk_length": 300,
    "dither": 0.0,
    "feature_extractor_type": "WhisperFeatureExtractor",
    "feature_size": N_MELS,
    "hop_length": 160,
    "n_fft": 400,
    "n_samples": 300 * SAMPLE_RATE,
    "nb_max_frames": 30000,
    "padding_side": "right",
    "padding_value": 0.0,
    "return_attention_mask": True,
    "sampling_rate": SAMPLE_RATE,
    # The image half (read by mlx-vlm's Qwen3VLImageProcessor).
    "image_mean": [0.5, 0.5, 0.5],
    "image_processor_type": "Qwen2VLImageProcessor",
    "image_std": [0.5, 0.5, 0.5],
    "max_pixels": MAX_PIXELS,
    "merge_size": 2,
    "min_pixels": MIN_PIXELS,
    "patch_size": 16,
    "processor_class": "Qwen3OmniMoeProcessor",
    "temporal_patch_size": 2,
}


@dataclass(frozen=True)
class OmniDims:
    """Shape of the thinker: language model (MoE), vision tower and audio tower."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    experts: int
    experts_per_token: int
    moe_intermediate: int
    vocab: int
    vision_depth: int
    vision_dim: int
    vision_heads: int
    vision_intermediate: int
    vision_positions: int  # a square number: the learned position grid
    audio_dim: int
    audio_layers: int
    audio_heads: int
    audio_ffn: int
    audio_downsample: int
    max_positions: int = 4096
    talker: bool = False  # a talker and code2wav too (enable_audio_output: speech out)


SIZES: Mapping[str, OmniDims] = {
    # ~2M params: loads and answers about a second of audio in well under a second.
    "tiny": OmniDims(
        hidden=128,
        layers=2,
        heads=4,
        kv_heads=2,
        head_dim=32,
        experts=4,
        experts_per_token=2,
        moe_intermediate=64,
        vocab=4096,
        vision_depth=2,
        vision_dim=64,
        vision_heads=4,
        vision_intermediate=128,
        vision_positions=64,
        audio_dim=64,
        audio_layers=2,
        audio_heads=4,
        audio_ffn=128,
        audio_downsample=32,
    ),
}
# The same thinker with a random talker and code2wav (mlx-vlm's own modules, ~1.2M weights):
# Qwen3-Omni speaking for itself (worker/vision/talker.py).
SIZES = {**SIZES, "talker": replace(SIZES["tiny"], talker=True)}


def _mrope_section(head_dim: int) -> list[int]:
    # Qwen3-Omni splits the rotary half-dimension 24:20:20 between time, height and width.
    half = head_dim // 2
    time = half * 24 // 64
    height = (half - time) // 2
    return [time, height, half - time - height]


def _word_id(tid: Any, word: str) -> int:
    """The id of a role name as a single token (ChatML's role ids; 0 if the BPE split it)."""
    try:
        return int(tid(word))
    except KeyError:
        return 0


def _text_config(d: OmniDims, tid: Any) -> dict[str, Any]:
    return {
        "attention_bias": False,
        "attention_dropout": 0.0,
        "decoder_sparse_step": 1,
        "head_dim": d.head_dim,
        "hidden_act": "silu",
        "hidden_size": d.hidden,
        "initializer_range": 0.02,
        "intermediate_size": 4 * d.hidden,
        "max_position_embeddings": d.max_positions,
        "mlp_only_layers": [],
        "model_type": "qwen3_omni_moe_text",
        "moe_intermediate_size": d.moe_intermediate,
        "norm_topk_prob": True,
        "num_attention_heads": d.heads,
        "num_experts": d.experts,
        "num_experts_per_tok": d.experts_per_token,
        "num_hidden_layers": d.layers,
        "num_key_value_heads": d.kv_heads,
        "rms_norm_eps": 1e-06,
        "rope_scaling": {
            "interleaved": True,
            "mrope_interleaved": True,
            "mrope_section": _mrope_section(d.head_dim),
            "rope_type": "default",
            "type": "default",
        },
        "rope_theta": 1000000,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": d.vocab,
    }


def config(d: OmniDims, tid: Any) -> dict[str, Any]:
    """config.json: the thinker in full; talker and code2wav as small, unused sections (the
    transformers config always writes them; `enable_audio_output` false leaves them unbuilt)."""
    thinker = {
        "audio_config": {
            "activation_function": "gelu",
            "conv_chunksize": 500,
            "d_model": d.audio_dim,
            "downsample_hidden_size": d.audio_downsample,
            "encoder_attention_heads": d.audio_heads,
            "encoder_ffn_dim": d.audio_ffn,
            "encoder_layers": d.audio_layers,
            "max_source_positions": 1500,
            "model_type": "qwen3_omni_moe_audio_encoder",
            "n_window": 50,
            "n_window_infer": 800,
            "num_hidden_layers": d.audio_layers,
            "num_mel_bins": N_MELS,
            "output_dim": d.hidden,
            "scale_embedding": False,
        },
        "audio_end_token_id": tid("<|audio_end|>"),
        "audio_start_token_id": tid("<|audio_start|>"),
        "audio_token_id": tid("<|audio_pad|>"),
        "dtype": "float32",
        "image_token_id": tid("<|image_pad|>"),
        "initializer_range": 0.02,
        "model_type": "qwen3_omni_moe_thinker",
        "position_id_per_seconds": 13,
        "seconds_per_chunk": 2,
        "text_config": _text_config(d, tid),
        "user_token_id": _word_id(tid, "user"),
        "video_token_id": tid("<|video_pad|>"),
        "vision_config": {
            "apply_vit_abs_pos_embed": True,
            "deepstack_visual_indexes": [0],
            "depth": d.vision_depth,
            "hidden_act": "gelu_pytorch_tanh",
            "hidden_size": d.vision_dim,
            "image_size": 16 * int(d.vision_positions**0.5),
            "in_channels": 3,
            "initializer_range": 0.02,
            "intermediate_size": d.vision_intermediate,
            "model_type": "qwen3_omni_moe_vision_encoder",
            "num_heads": d.vision_heads,
            "num_position_embeddings": d.vision_positions,
            "out_hidden_size": d.hidden,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "tokens_per_second": 2,
        },
        "vision_end_token_id": tid("<|vision_end|>"),
        "vision_start_token_id": tid("<|vision_start|>"),
    }
    talker_text = {**_text_config(d, tid), "vocab_size": 256, "num_hidden_layers": 1}
    talker = {
        "accept_hidden_layer": d.layers - 1,
        "audio_token_id": thinker["audio_token_id"],
        "code_predictor_config": {
            "head_dim": d.head_dim,
            "hidden_size": d.hidden,
            "intermediate_size": 2 * d.hidden,
            "layer_types": ["full_attention"],
            "num_attention_heads": d.heads,
            "num_code_groups": 4,
            "num_hidden_layers": 1,
            "num_key_value_heads": d.kv_heads,
            "vocab_size": 256,
        },
        "image_token_id": thinker["image_token_id"],
        "model_type": "qwen3_omni_moe_talker",
        "num_code_groups": 4,
        "text_config": talker_text,
        "thinker_hidden_size": d.hidden,
        "video_token_id": thinker["video_token_id"],
    }
    return {
        "architectures": ["Qwen3OmniMoeForConditionalGeneration"],
        "assistant_token_id": _word_id(tid, "assistant"),
        "code2wav_config": {"hidden_size": d.hidden, "num_hidden_layers": 1},
        "enable_audio_output": False,
        "im_end_token_id": tid("<|im_end|>"),
        "im_start_token_id": tid("<|im_start|>"),
        "model_type": "qwen3_omni_moe",
        "talker_config": talker,
        "thinker_config": thinker,
        "torch_dtype": "float32",
        "system_token_id": _word_id(tid, "system"),
        "transformers_version": "4.57.0",
        "tts_bos_token_id": tid("<tts_text_bos>"),
        "tts_eos_token_id": tid("<tts_text_eod>"),
        "tts_pad_token_id": tid("<tts_pad>"),
        "user_token_id": thinker["user_token_id"],
    }


def generation_config(tid: Any) -> dict[str, Any]:

    # Qwen3-Omni-Thinking's published sampling defaults.
    return qwen_generation_config(tid, temperature=0.6, top_p=0.95, top_k=20)


def text_specs(d: OmniDims) -> Specs:
    """The thinker's MoE language model, named like transformers' `thinker.model.*`."""

    h, q_out, kv_out = d.hidden, d.heads * d.head_dim, d.kv_heads * d.head_dim
    embed_std = LOGIT_STD / h**0.5
    specs: Specs = {
        "thinker.model.embed_tokens.weight": ((d.vocab, h), embed_std),
        "thinker.model.norm.weight": ((h,), "ones"),
        "thinker.lm_head.weight": ((d.vocab, h), embed_std),
    }
    for i in range(d.layers):
        p = f"thinker.model.layers.{i}."
        specs |= norm(p + "input_layernorm", h, bias=False)
        specs |= norm(p + "post_attention_layernorm", h, bias=False)
        specs |= linear(p + "self_attn.q_proj", q_out, h, bias=False)
        specs |= linear(p + "self_attn.k_proj", kv_out, h, bias=False)
        specs |= linear(p + "self_attn.v_proj", kv_out, h, bias=False)
        specs |= linear(p + "self_attn.o_proj", h, q_out, bias=False, gain=RESIDUAL_GAIN)
        specs |= norm(p + "self_attn.q_norm", d.head_dim, bias=False)
        specs |= norm(p + "self_attn.k_norm", d.head_dim, bias=False)
        specs |= linear(p + "mlp.gate", d.experts, h, bias=False)
        for e in range(d.experts):
            x = f"{p}mlp.experts.{e}."
            specs |= linear(x + "gate_proj", d.moe_intermediate, h, bias=False)
            specs |= linear(x + "up_proj", d.moe_intermediate, h, bias=False)
            down_gain = RESIDUAL_GAIN
            specs |= linear(x + "down_proj", h, d.moe_intermediate, bias=False, gain=down_gain)
    return specs


def vision_specs(d: OmniDims) -> Specs:
    """The vision tower, named like transformers' `thinker.visual.*` (Conv3d as PyTorch)."""
    dim, merged = d.vision_dim, d.vision_dim * 4  # spatial_merge_size 2: 2x2 patches merged
    patch_in = 3 * 2 * 16 * 16
    specs: Specs = {
        "thinker.visual.patch_embed.proj.weight": ((dim, 3, 2, 16, 16), patch_in**-0.5),
        "thinker.visual.patch_embed.proj.bias": ((dim,), "zeros"),
        "thinker.visual.pos_embed.weight": ((d.vision_positions, dim), 0.02),
    }
    for i in range(d.vision_depth):
        p = f"thinker.visual.blocks.{i}."
        specs |= qwen_vision_block(p, dim, d.vision_intermediate, "qwen3_vl")
    # The final merger normalizes before the 2x2 shuffle, the deepstack mergers after it.
    specs |= qwen_patch_merger("thinker.visual.merger.", merged, d.hidden, norm_dim=dim)
    specs |= qwen_patch_merger("thinker.visual.merger_list.0.", merged, d.hidden, norm_dim=merged)
    return specs


def audio_specs(d: OmniDims) -> Specs:
    """The audio encoder, named like transformers' `thinker.audio_tower.*` (Conv2d as
    PyTorch: out, in, kh, kw)."""
    dim, ds = d.audio_dim, d.audio_downsample
    freq = ((((N_MELS + 1) // 2 + 1) // 2 + 1) // 2) * ds  # after three stride-2 convs
    p = "thinker.audio_tower."
    specs: Specs = {
        p + "conv2d1.weight": ((ds, 1, 3, 3), 9**-0.5),
        p + "conv2d1.bias": ((ds,), "zeros"),
        p + "conv2d2.weight": ((ds, ds, 3, 3), (9 * ds) ** -0.5),
        p + "conv2d2.bias": ((ds,), "zeros"),
        p + "conv2d3.weight": ((ds, ds, 3, 3), (9 * ds) ** -0.5),
        p + "conv2d3.bias": ((ds,), "zeros"),
        p + "conv_out.weight": ((dim, freq), freq**-0.5),
    }
    for i in range(d.audio_layers):
        q = f"{p}layers.{i}."
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            specs |= linear(q + "self_attn." + proj, dim, dim)
        specs |= norm(q + "self_attn_layer_norm", dim) | norm(q + "final_layer_norm", dim)
        specs |= linear(q + "fc1", d.audio_ffn, dim) | linear(q + "fc2", dim, d.audio_ffn)
    specs |= norm(p + "ln_post", dim) | linear(p + "proj1", dim, dim)
    # Scaled so an audio token's embedding is of the order of a text token's.
    specs |= linear(p + "proj2", d.hidden, dim, gain=4.0)
    return specs


def build(arch: object, dims: OmniDims, out_dir: Path) -> int:
    """Write every file of a tiny Qwen3-Omni thinker checkpoint into `out_dir`; return its
    parameters. Signature of `worker.tiny_models.arch.Arch.build` (`arch` is unused here)."""
    tok = train_tokenizer(TOKENIZER, dims.vocab)
    tid = id_of(tok)
    write_tokenizer_files(TOKENIZER, tok, out_dir, model_max_length=dims.max_positions)
    written = config(dims, tid)
    if dims.talker:
        written = talker_config(written, tok)
    write_json(out_dir / "config.json", written)
    write_json(out_dir / "generation_config.json", generation_config(tid))
    write_json(out_dir / "preprocessor_config.json", PREPROCESSOR_CONFIG)
    specs = {**text_specs(dims), **vision_specs(dims), **audio_specs(dims)}
    tensors = materialize(specs)
    added_ids = [tid(content) for content, _ in TOKENIZER.added_tokens]
    tensors["thinker.lm_head.weight"][added_ids] = 0.0
    if dims.talker:
        tensors |= talker_tensors(written)
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return sum(t.size for t in tensors.values())
