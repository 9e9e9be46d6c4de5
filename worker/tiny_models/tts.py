"""Tiny random-weight text-to-speech checkpoints in the on-disk format mlx-audio loads.

Qwen3-TTS, written the way a converted (mlx-community) checkpoint is laid out and read back
through mlx-audio's own `load_model` path (config, sanitize, post-load hook):

- `qwen3_tts` (Qwen3-TTS CustomVoice): `config.json` (talker, code predictor, preset speakers
  and languages), `model.safetensors` with the MLX parameter names, a Qwen2-style byte-level BPE
  tokenizer carrying the TTS control tokens, `generation_config.json`, and the codec in
  `speech_tokenizer/` (its own `config.json` and Hugging Face-named `model.safetensors`: the
  codebooks as `cluster_usage` / `embedding_sum`, which mlx-audio's sanitize turns into
  embeddings). `qwen3_tts_voice_design` (no presets: the voice is described) and
  `qwen3_tts_base` (voice cloning: speaker encoder and the codec's encoder) are the same model.

More families (Soprano, VoxCPM2, MOSS-TTS-Nano): worker/tiny_models/tts_families.py.

Weights are random but deterministic (numpy, seeded per tensor name). Random models never pick
their stop token on purpose, so `generation_config.json` caps every request at a few codec
frames (`max_new_tokens`): lengths are then fixed, which the equivalence tests rely on.

mlx and mlx-audio are imported inside the builders only, so `worker.tiny_models.registry` (which
registers these builders) stays importable without them.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from worker.tiny_models.tokenizer import (
    QWEN2,
    id_of,
    train_tokenizer,
    write_json,
    write_tokenizer_files,
)

SEED = 0
TEXT_VOCAB = 4096
MAX_POSITIONS = 4096

# Qwen3-TTS marks text with these three tokens (ids 151671-151673 in the real vocabulary).
QWEN3_TTS_TOKENIZER = dataclasses.replace(
    QWEN2,
    added_tokens=QWEN2.added_tokens
    + (("<tts_pad>", True), ("<tts_text_bos>", True), ("<tts_text_eod>", True)),
)

# Preset voices of the tiny CustomVoice checkpoint: name -> (codec id, dialect or False).
QWEN3_TTS_SPEAKERS: Mapping[str, tuple[int, Any]] = {
    "vivian": (3000, False),
    "ryan": (3001, False),
    "eric": (3002, "sichuan_dialect"),
}
QWEN3_TTS_LANGUAGES: Mapping[str, int] = {
    "chinese": 2055,
    "english": 2050,
    "german": 2053,
    "sichuan_dialect": 2062,
}


@dataclass(frozen=True)
class TtsDims:
    """Shape of a tiny TTS checkpoint: the language model and the codec frames per request."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    max_new_tokens: int  # codec frames (Qwen3-TTS) or tokens per sentence (Soprano)
    # Qwen3-TTS at its real size (benchmarks only): the head width where it is not
    # hidden // heads, the code predictor's layers, the text embeddings' width, and the real
    # 24 kHz codec instead of the tiny 8 kHz one.
    head_size: int = 0
    predictor_layers: int = 1
    text_hidden: int = 0
    real_codec: bool = False

    @property
    def head_dim(self) -> int:
        return self.head_size or self.hidden // self.heads


QWEN3_TTS_SIZES: Mapping[str, TtsDims] = {
    "tiny": TtsDims(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, max_new_tokens=6),
    # The same model speaking longer (40 frames, 3.2 s): for benchmarks (scripts/bench_speech.py).
    "bench": TtsDims(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, max_new_tokens=40),
    # Speaking for minutes (2,000 frames): for tests that hang up in the middle of a speech.
    "long": TtsDims(
        hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, max_new_tokens=2000
    ),
    # Qwen3-TTS-12Hz-0.6B's shapes (talker 28 x 1024, code predictor 5 layers, the 1536-wide
    # 24 kHz codec) with random float32 weights and the tiny text vocabulary, 25 frames (2 s):
    # the speed of the real model (scripts/bench_speech.py), never built by tests (~2.6 GB).
    "real": TtsDims(
        hidden=1024,
        layers=28,
        heads=16,
        kv_heads=8,
        intermediate=3072,
        max_new_tokens=25,
        head_size=128,
        predictor_layers=5,
        text_hidden=2048,
        real_codec=True,
    ),  # fmt: skip
}
# Cloning needs the codec's encoder too, which only the tiny codec has here.
QWEN3_TTS_BASE_SIZES = {k: v for k, v in QWEN3_TTS_SIZES.items() if not v.real_codec}


def _random(name: str, shape: tuple[int, ...], std: float) -> np.ndarray:
    # Seeded by name, so a tensor's values do not depend on which other tensors exist.
    rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)


def randomize(params: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Random values for a model's parameters (name -> array), deterministic per name.

    Matrices and kernels get N(0, 1/fan_in); vectors (norm scales, biases, snake alphas,
    layer scales) keep the value the module initialised them to, which is constant.
    """
    out = {}
    for name, value in params.items():
        array = np.asarray(value, dtype=np.float32)
        if array.ndim >= 2:
            fan_in = int(np.prod(array.shape[1:]))
            array = _random(name, array.shape, fan_in**-0.5)
        out[name] = np.ascontiguousarray(array)
    return out


def _flat_params(module: Any) -> dict[str, Any]:
    from mlx.utils import tree_flatten

    return dict(tree_flatten(module.parameters()))


def _save(weights: Mapping[str, np.ndarray], path: Path) -> int:
    from safetensors.numpy import save_file

    save_file(dict(weights), str(path), metadata={"format": "mlx"})
    return sum(w.size for w in weights.values())


# -- Qwen3-TTS CustomVoice -----------------------------------------------------------------


def qwen3_tts_config(d: TtsDims, tid: Any) -> dict[str, Any]:
    mrope = [d.head_dim // 4, d.head_dim // 8, d.head_dim // 8]  # sums to head_dim / 2
    return {
        "architectures": ["Qwen3TTSForConditionalGeneration"],
        "model_type": "qwen3_tts",
        "tts_model_type": "custom_voice",
        "tts_model_size": "tiny",
        "tokenizer_type": "qwen3_tts_tokenizer_12hz",
        "im_start_token_id": tid("<|im_start|>"),
        "im_end_token_id": tid("<|im_end|>"),
        "tts_pad_token_id": tid("<tts_pad>"),
        "tts_bos_token_id": tid("<tts_text_bos>"),
        "tts_eos_token_id": tid("<tts_text_eod>"),
        "sample_rate": 24000 if d.real_codec else 8000,
        "talker_config": {
            "vocab_size": 3072,
            "hidden_size": d.hidden,
            "intermediate_size": d.intermediate,
            "num_hidden_layers": d.layers,
            "num_attention_heads": d.heads,
            "num_key_value_heads": d.kv_heads,
            "head_dim": d.head_dim,
            "hidden_act": "silu",
            "max_position_embeddings": MAX_POSITIONS,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "rope_scaling": {"interleaved": True, "mrope_section": mrope, "rope_type": "default"},
            "num_code_groups": 16,
            "text_hidden_size": d.text_hidden or d.hidden,
            "text_vocab_size": TEXT_VOCAB,
            "codec_eos_token_id": 2150,
            "codec_think_id": 2154,
            "codec_nothink_id": 2155,
            "codec_think_bos_id": 2156,
            "codec_think_eos_id": 2157,
            "codec_pad_id": 2148,
            "codec_bos_id": 2149,
            "codec_language_id": dict(QWEN3_TTS_LANGUAGES),
            "spk_id": {name: codec_id for name, (codec_id, _) in QWEN3_TTS_SPEAKERS.items()},
            "spk_is_dialect": {name: dialect for name, (_, dialect) in QWEN3_TTS_SPEAKERS.items()},
            "code_predictor_config": {
                "vocab_size": 2048,
                "hidden_size": d.hidden,
                "intermediate_size": d.intermediate,
                "num_hidden_layers": d.predictor_layers,
                "num_attention_heads": d.heads,
                "num_key_value_heads": d.kv_heads,
                "head_dim": d.head_dim,
                "max_position_embeddings": MAX_POSITIONS,
                "num_code_groups": 16,
            },
        },
    }


def qwen3_tts_generation_config(d: TtsDims) -> dict[str, Any]:
    # Qwen3-TTS's published sampling defaults, with a short cap on codec frames.
    return {
        "do_sample": True,
        "max_new_tokens": d.max_new_tokens,
        "repetition_penalty": 1.05,
        "temperature": 0.9,
        "top_k": 50,
        "top_p": 1.0,
    }


# The codec's decoder, shrunk. mlx-audio's sanitize guesses the layout of every conv kernel
# from its shape and only guesses right when channels exceed 64 (as in the real 1536-wide
# decoder), so the last stage keeps 65 channels. Dilated and transposed convolutions run on a
# slow generic path on the CPU, and their cost grows with samples: the tiny codec therefore
# speaks at 8 kHz (640 samples per 12.5 Hz frame: 8 x 20 times the pre-network's 2 x 2)
# where the real one speaks at 24 kHz (1920 samples per frame).
SPEECH_TOKENIZER_CONFIG: dict[str, Any] = {
    "model_type": "qwen3_tts_tokenizer_12hz",
    "encoder_valid_num_quantizers": 16,
    "input_sample_rate": 8000,
    "output_sample_rate": 8000,
    "decode_upsample_rate": 640,
    "encode_downsample_rate": 640,
    "decoder_config": {
        "latent_dim": 128,
        "codebook_dim": 132,
        "codebook_size": 2048,
        "decoder_dim": 260,
        "hidden_size": 64,
        "intermediate_size": 128,
        "head_dim": 16,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "num_hidden_layers": 1,
        "num_quantizers": 16,
        "num_semantic_quantizers": 1,
        "semantic_codebook_size": 4096,
        "sliding_window": 72,
        "upsample_rates": [8, 20],
        "upsampling_ratios": [2, 2],
        "vector_quantization_hidden_dimension": 66,
    },
}


# The real codec: mlx-audio's default decoder config (1536 wide, 24 kHz, 1920 samples a frame).
REAL_SPEECH_TOKENIZER_CONFIG: dict[str, Any] = {
    "model_type": "qwen3_tts_tokenizer_12hz",
    "encoder_valid_num_quantizers": 16,
    "input_sample_rate": 24000,
    "output_sample_rate": 24000,
    "decode_upsample_rate": 1920,
    "encode_downsample_rate": 1920,
    "decoder_config": {},
}


def _codec_config(d: TtsDims) -> dict[str, Any]:
    return REAL_SPEECH_TOKENIZER_CONFIG if d.real_codec else SPEECH_TOKENIZER_CONFIG


def _speech_tokenizer_weights(codec_config: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Random codec weights under the Hugging Face names mlx-audio's sanitize expects."""
    from mlx_audio.tts.models.qwen3_tts.config import Qwen3TTSTokenizerConfig
    from mlx_audio.tts.models.qwen3_tts.qwen3_tts import check_array_shape_qwen3
    from mlx_audio.tts.models.qwen3_tts.speech_tokenizer import Qwen3TTSSpeechTokenizer

    config = Qwen3TTSTokenizerConfig(decoder_config=dict(codec_config["decoder_config"]))
    weights = randomize(_flat_params(Qwen3TTSSpeechTokenizer(config)))
    out = {}
    for name, value in weights.items():
        if value.ndim == 3 and not check_array_shape_qwen3(value):
            raise AssertionError(f"mlx-audio would transpose {name} {value.shape}: widen it")
        if name.endswith(".codebook.embed.weight"):
            # Stored as running statistics: embedding = embedding_sum / cluster_usage.
            base = name[: -len(".codebook.embed.weight")]
            out[f"{base}._codebook.embedding_sum"] = value
            out[f"{base}._codebook.cluster_usage"] = np.ones(value.shape[0], np.float32)
        else:
            out[name] = value
    return out


def build_qwen3_tts(arch: Any, dims: TtsDims, out_dir: Path) -> int:
    """Write a tiny Qwen3-TTS CustomVoice checkpoint into `out_dir`; return its parameters."""
    return _build_qwen3(qwen3_tts_config, dims, out_dir, _codec_config(dims), {})


def _build_qwen3(
    make_config: Any,
    dims: TtsDims,
    out_dir: Path,
    codec_config: Mapping[str, Any],
    codec_extra: Mapping[str, np.ndarray],
) -> int:
    import mlx.core as mx
    from mlx_audio.tts.models.qwen3_tts.config import ModelConfig
    from mlx_audio.tts.models.qwen3_tts.qwen3_tts import Model

    tok = train_tokenizer(QWEN3_TTS_TOKENIZER, TEXT_VOCAB)
    config = make_config(dims, id_of(tok))
    write_tokenizer_files(QWEN3_TTS_TOKENIZER, tok, out_dir, model_max_length=MAX_POSITIONS)
    write_json(out_dir / "config.json", config)
    write_json(out_dir / "generation_config.json", qwen3_tts_generation_config(dims))
    mx.random.seed(SEED)  # module initialisers draw from it; randomize() overwrites those
    weights = randomize(_flat_params(Model(ModelConfig.from_dict(config))))
    # A zero codec-head row gives the codec's end token logit 0 while the top-k candidates'
    # logits are well above it: a random model never ends early, max_new_tokens fixes lengths.
    weights["talker.codec_head.weight"][config["talker_config"]["codec_eos_token_id"]] = 0.0
    n_params = _save(weights, out_dir / "model.safetensors")
    codec_dir = out_dir / "speech_tokenizer"
    codec_dir.mkdir()
    write_json(codec_dir / "config.json", codec_config)
    codec_weights = {**_speech_tokenizer_weights(codec_config), **codec_extra}
    return n_params + _save(codec_weights, codec_dir / "model.safetensors")


# -- Qwen3-TTS VoiceDesign (a voice described in words) -----------------------------------
#
# No preset speakers: the request's `instructions` describe the voice, and mlx-audio refuses to
# speak without them. The rest is CustomVoice's.


def qwen3_tts_voice_design_config(d: TtsDims, tid: Any) -> dict[str, Any]:
    config = qwen3_tts_config(d, tid)
    talker = {**config["talker_config"], "spk_id": {}, "spk_is_dialect": {}}
    return {**config, "tts_model_type": "voice_design", "talker_config": talker}


def build_qwen3_tts_voice_design(arch: Any, dims: TtsDims, out_dir: Path) -> int:
    """Write a tiny Qwen3-TTS VoiceDesign checkpoint into `out_dir`."""
    return _build_qwen3(qwen3_tts_voice_design_config, dims, out_dir, _codec_config(dims), {})


# -- Qwen3-TTS Base (voice cloning) -------------------------------------------------------
#
# Base has no preset speakers. It clones a voice two ways, both exercised by the tests:
# from the x-vector of the reference audio (the ECAPA-TDNN `speaker_encoder` in
# model.safetensors), and in context (reference audio + transcript), which also needs the
# codec's *encoder* (`speech_tokenizer/` gains `encoder_config` and `encoder.*` weights).
# The speaker encoder's 1x1 convolutions keep more than 64 input channels for the same reason
# the codec decoder does (mlx-audio's layout guess); its output is the talker's width.
QWEN3_TTS_SPEAKER_ENCODER: dict[str, Any] = {
    "mel_dim": 128,  # mlx-audio's mel front end is fixed at 128 bands
    "enc_channels": [72, 72, 72, 144],  # the last is the sum of the SE-Res2Net blocks'
    "enc_kernel_sizes": [5, 3, 3, 1],
    "enc_dilations": [1, 2, 3, 1],
    "enc_attention_channels": 65,
    "enc_res2net_scale": 8,
    "enc_se_channels": 65,
    "sample_rate": 24000,
}

# 8 kHz in, 12.5 codec frames a second out: Seanet strides 4*4*4*5 (25 Hz), then 2.
SPEECH_ENCODER_CONFIG: dict[str, Any] = {
    "frame_rate": 12.5,
    "sampling_rate": 8000,
    "upsampling_ratios": [4, 4, 4, 5],
    "num_filters": 4,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_hidden_layers": 1,
    "codebook_dim": 16,
    "codebook_size": 2048,
    "num_quantizers": 16,
    "num_semantic_quantizers": 1,
    "vector_quantization_hidden_dimension": 16,
}


def qwen3_tts_base_config(d: TtsDims, tid: Any) -> dict[str, Any]:
    config = qwen3_tts_config(d, tid)
    talker = {
        k: v for k, v in config["talker_config"].items() if k not in ("spk_id", "spk_is_dialect")
    }
    speaker_encoder = {**QWEN3_TTS_SPEAKER_ENCODER, "enc_dim": d.hidden}
    return {
        **config,
        "tts_model_type": "base",
        "talker_config": {**talker, "spk_id": {}, "spk_is_dialect": {}},
        "speaker_encoder_config": speaker_encoder,
    }


def _seanet_hf_name(name: str) -> str:
    """mlx-audio's Seanet parameter name -> the Hugging Face (Mimi) one its sanitize maps back:
    layer i's residual block is HF layer 3i+1 (convs 1 and 3), its downsampling HF 3i+3."""
    parts = name.split(".")
    suffix = ".".join(parts[-2:])  # conv.weight / conv.bias
    if parts[1] == "init_conv1d":
        return f"encoder.encoder.layers.0.{suffix}"
    if parts[1] == "final_conv1d":
        return f"encoder.encoder.layers.14.{suffix}"
    layer = int(parts[2])
    if parts[3] == "downsample":
        return f"encoder.encoder.layers.{3 * layer + 3}.{suffix}"
    block = {"0": 1, "1": 3}[parts[6]]
    return f"encoder.encoder.layers.{3 * layer + 1}.block.{block}.{suffix}"


def _speech_encoder_weights() -> dict[str, np.ndarray]:
    """Random codec-encoder weights under the Hugging Face names mlx-audio's sanitize expects
    (convolutions as PyTorch's [out, in, kernel]; attention as separate q/k/v)."""
    import mlx.core as mx
    from mlx_audio.tts.models.qwen3_tts.config import Qwen3TTSTokenizerEncoderConfig
    from mlx_audio.tts.models.qwen3_tts.speech_tokenizer import Qwen3TTSSpeechTokenizerEncoder

    mx.random.seed(SEED)
    encoder = Qwen3TTSSpeechTokenizerEncoder(
        Qwen3TTSTokenizerEncoderConfig(**SPEECH_ENCODER_CONFIG)
    )
    params = {
        k: v for k, v in _flat_params(encoder).items() if not k.endswith("codebook.initialized")
    }
    weights = randomize({f"encoder_model.{k}": v for k, v in params.items()})
    out: dict[str, np.ndarray] = {}
    layer = "encoder.encoder_transformer.layers."
    for full, value in weights.items():
        name = full[len("encoder_model.") :]
        if name.startswith("encoder."):
            out[_seanet_hf_name(name)] = _torch_conv(value)
        elif name.startswith("downsample."):
            out["encoder.downsample.conv.weight"] = _torch_conv(value)
        elif name.startswith("encoder_transformer."):
            parts = name.split(".")
            prefix, rest = f"{layer}{parts[3]}.", ".".join(parts[4:])
            if rest == "self_attn.in_proj.weight":
                for part, chunk in zip("qkv", np.split(value, 3), strict=True):
                    out[f"{prefix}self_attn.{part}_proj.weight"] = np.ascontiguousarray(chunk)
                continue
            out[prefix + _TRANSFORMER_HF_NAMES[rest]] = value
        else:  # quantizer.rvq_{first,rest}.{input_proj,output_proj,vq.layers.i.codebook.*}
            parts = name.split(".")
            rvq = {"rvq_first": "semantic", "rvq_rest": "acoustic"}[parts[1]]
            base = f"encoder.quantizer.{rvq}_residual_vector_quantizer"
            if parts[2] in ("input_proj", "output_proj"):
                out[f"{base}.{parts[2]}.weight"] = _torch_conv(value)
            elif parts[-1] == "embedding_sum":
                out[f"{base}.layers.{parts[4]}.codebook.embed_sum"] = value
            else:  # cluster_usage: a count; ones keep embed_sum the codebook itself
                out[f"{base}.layers.{parts[4]}.codebook.cluster_usage"] = np.ones_like(value)
    return out


def _torch_conv(value: np.ndarray) -> np.ndarray:
    # MLX convolution kernels are [out, kernel, in], PyTorch's [out, in, kernel].
    return np.ascontiguousarray(value.swapaxes(-1, -2)) if value.ndim == 3 else value


_TRANSFORMER_HF_NAMES = {
    "self_attn.out_proj.weight": "self_attn.o_proj.weight",
    "gating.linear1.weight": "mlp.fc1.weight",
    "gating.linear2.weight": "mlp.fc2.weight",
    "norm1.weight": "input_layernorm.weight",
    "norm1.bias": "input_layernorm.bias",
    "norm2.weight": "post_attention_layernorm.weight",
    "norm2.bias": "post_attention_layernorm.bias",
    "layer_scale_1.scale": "self_attn_layer_scale.scale",
    "layer_scale_2.scale": "mlp_layer_scale.scale",
}


def build_qwen3_tts_base(arch: Any, dims: TtsDims, out_dir: Path) -> int:
    """Write a tiny Qwen3-TTS Base (voice cloning) checkpoint into `out_dir`."""
    codec_config = {**SPEECH_TOKENIZER_CONFIG, "encoder_config": dict(SPEECH_ENCODER_CONFIG)}
    return _build_qwen3(
        qwen3_tts_base_config, dims, out_dir, codec_config, _speech_encoder_weights()
    )
