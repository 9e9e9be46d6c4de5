"""Tiny random-weight checkpoints of more mlx-audio TTS families: Soprano, VoxCPM2 and
MOSS-TTS-Nano.

Each is written the way a converted (mlx-community) checkpoint is laid out and is read back
through mlx-audio's own `load_model` (config, sanitize, strict weight loading, post-load hook):

- `soprano` (Soprano-80M layout): a Qwen3 language model plus a Vocos decoder in one
  `model.safetensors`, and a tokenizer with Soprano's `[STOP]`, `[TEXT]`, `[START]` markers.
- `voxcpm2`: `config.json` (MiniCPM4 backbone with LongRoPE factors, feature encoder, DiT,
  AudioVAE V2 with its own encode / decode rates), `model.safetensors` with the MLX parameter
  names (`base_lm.*`, `residual_lm.*`, `feat_encoder.*`, `feat_decoder.estimator.*`,
  `audio_vae.*`, ...) and a fast tokenizer (`tokenizer.json`, `tokenizer_config.json`).
  The stop head is zero: its two logits tie, argmax picks "go on", and every request makes
  exactly `max_new_tokens` patches (`generation_config.json`, passed as `max_tokens`).
- `moss_tts_nano`: `config.json` (GPT-2 global and local transformers, `n_vq` codebooks),
  `model.safetensors`, a SentencePiece `tokenizer.model` with MOSS's control ids 0-9, and the
  MOSS audio tokenizer in `audio_tokenizer/` (`config.json` with `encoder_kwargs` /
  `decoder_kwargs` / `quantizer_kwargs`, upstream-named `model.safetensors`: weight-normalised
  convolutions as `parametrizations.weight.original0/1`, `linear1` / `in_projs.0`, which
  mlx-audio's sanitize renames). It is stereo (two channels, interleaved inside the codec) like
  the real 48 kHz one, at 8 kHz here. The local transformer's final norm carries a bias that
  the "audio slot" token's embedding row points along, so the model always chooses to go on
  speaking and every request makes exactly `max_new_tokens` frames.

Weights are random but deterministic (see `worker.tiny_models.tts.randomize`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from worker.tiny_models.tokenizer import (
    QWEN2,
    TokenizerSpec,
    id_of,
    stdlib_corpus,
    train_tokenizer,
    write_json,
    write_tokenizer_files,
)
from worker.tiny_models.tts import (
    MAX_POSITIONS,
    SEED,
    TEXT_VOCAB,
    TtsDims,
    _flat_params,
    _save,
    randomize,
)

SOPRANO_TOKENIZER = TokenizerSpec(
    pretokenize_regex=QWEN2.pretokenize_regex,
    nfc=True,
    added_tokens=(("[STOP]", True), ("[TEXT]", True), ("[START]", True)),
    bos_token=None,
    eos_token="[STOP]",
    pad_token="[STOP]",
    additional_special_tokens=("[TEXT]", "[START]"),
    chat_template=None,
    tokenizer_class="PreTrainedTokenizerFast",
    post_processor_adds_bos=False,
    extra_config={"clean_up_tokenization_spaces": False},
)

SOPRANO_SIZES: Mapping[str, TtsDims] = {
    "tiny": TtsDims(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, max_new_tokens=10),
    "bench": TtsDims(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, max_new_tokens=64),
}


# -- Soprano -----------------------------------------------------------------------------


def soprano_config(d: TtsDims, tid: Any) -> dict[str, Any]:
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "soprano",
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
        "tie_word_embeddings": False,
        "vocab_size": TEXT_VOCAB,
        "sample_rate": 32000,
        "eos_token_id": tid("[STOP]"),
        "pad_token_id": tid("[STOP]"),
        "torch_dtype": "float32",
    }


def soprano_generation_config(d: TtsDims) -> dict[str, Any]:
    # Soprano ships none; the engine passes max_new_tokens to generate() as max_tokens.
    return {"max_new_tokens": d.max_new_tokens}


def build_soprano(arch: Any, dims: TtsDims, out_dir: Path) -> int:
    """Write a tiny Soprano checkpoint into `out_dir`; return its parameters."""
    import mlx.core as mx
    from mlx_audio.tts.models.soprano import Model, ModelConfig

    tok = train_tokenizer(SOPRANO_TOKENIZER, TEXT_VOCAB)
    config = soprano_config(dims, id_of(tok))
    write_tokenizer_files(SOPRANO_TOKENIZER, tok, out_dir, model_max_length=MAX_POSITIONS)
    write_json(out_dir / "config.json", config)
    write_json(out_dir / "generation_config.json", soprano_generation_config(dims))
    mx.random.seed(SEED)
    # Soprano's loader sizes the decoder from the checkpoint's path; build it the same way.
    model = Model(ModelConfig.from_dict({**config, "model_path": str(out_dir)}))
    weights = randomize(_flat_params(model))
    stop = tok.token_to_id("[STOP]")
    # A zero output row gives the stop token logit 0 while others spread widely: a random
    # model then practically never stops on its own, and max_new_tokens fixes the length.
    weights["language_model.lm_head.weight"][stop] = 0.0
    return _save(weights, out_dir / "model.safetensors")


@dataclass(frozen=True)
class FamilyDims:
    """Shape of a tiny checkpoint of these families: the backbone and the length cap."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    max_new_tokens: int  # VoxCPM2 patches / MOSS-TTS-Nano frames per request

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


# -- VoxCPM2 -------------------------------------------------------------------------------

VOXCPM2_SIZES: Mapping[str, FamilyDims] = {
    "tiny": FamilyDims(
        hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, vocab=2048, max_new_tokens=6
    ),
}

VOXCPM2_TOKENIZER = TokenizerSpec(
    pretokenize_regex=r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}| ?[^\s\p{L}\p{N}]+|\s+""",
    nfc=True,
    added_tokens=(("<unk>", True), ("<s>", True), ("</s>", True)),
    bos_token="<s>",
    eos_token="</s>",
    pad_token=None,
    additional_special_tokens=(),
    chat_template=None,
    tokenizer_class="PreTrainedTokenizerFast",
    post_processor_adds_bos=False,
    extra_config={"clean_up_tokenization_spaces": False, "unk_token": "<unk>"},
)

# AudioVAE V2, shrunk: encodes at 8 kHz (strides 4*5*4: 100 latent frames a second) and decodes
# at 16 kHz (strides 4*5*4*2), so a patch of 2 latent frames is 320 output samples. The real
# one encodes at 16 kHz and decodes at 48 kHz; keeping the two rates apart keeps mlx-audio's
# resampling of reference audio (model rate -> encoder rate) on the path the tests run.
VOXCPM2_AUDIO_VAE: dict[str, Any] = {
    "encoder_dim": 8,
    "encoder_rates": [4, 5, 4],
    "latent_dim": 16,
    "decoder_dim": 64,
    "decoder_rates": [4, 5, 4, 2],
    "depthwise": True,
    "sample_rate": 8000,
    "out_sample_rate": 16000,
    "use_noise_block": False,
    "sr_bin_boundaries": [20000, 30000, 40000],
    "cond_type": "scale_bias",
    "cond_dim": 16,
    "cond_out_layer": False,
}


def voxcpm2_config(d: FamilyDims, tid: Any) -> dict[str, Any]:
    half = d.head_dim // 2
    small = {"hidden_dim": 32, "ffn_dim": 64, "num_heads": 2, "num_layers": 1}
    return {
        "architecture": "voxcpm2",
        "model_type": "voxcpm2",
        "lm_config": {
            "bos_token_id": tid("<s>"),
            "eos_token_id": tid("</s>"),
            "hidden_size": d.hidden,
            "intermediate_size": d.intermediate,
            "max_position_embeddings": MAX_POSITIONS,
            "num_attention_heads": d.heads,
            "num_hidden_layers": d.layers,
            "num_key_value_heads": d.kv_heads,
            "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0,
            "rope_scaling": {
                "type": "longrope",
                "long_factor": [1.0 + i / half for i in range(half)],
                "short_factor": [1.0] * half,
                "original_max_position_embeddings": MAX_POSITIONS,
            },
            "vocab_size": d.vocab,
            "scale_emb": 12,
            "dim_model_base": 256,
            "scale_depth": 1.4,
            "use_mup": True,
        },
        "patch_size": 2,
        "feat_dim": VOXCPM2_AUDIO_VAE["latent_dim"],
        "residual_lm_num_layers": 1,
        "scalar_quantization_latent_dim": 16,
        "scalar_quantization_scale": 9,
        "encoder_config": dict(small),
        "dit_config": {
            **small,
            "cfm_config": {
                "sigma_min": 1e-6,
                "solver": "euler",
                "t_scheduler": "log-norm",
                "inference_cfg_rate": 2.0,
            },
            "mean_mode": False,
        },
        "audio_vae_config": dict(VOXCPM2_AUDIO_VAE),
        "max_length": MAX_POSITIONS,
    }


def voxcpm2_generation_config(d: FamilyDims) -> dict[str, Any]:
    # VoxCPM2 ships none; the engine passes max_new_tokens to generate() as max_tokens.
    return {"max_new_tokens": d.max_new_tokens}


def build_voxcpm2(arch: Any, dims: FamilyDims, out_dir: Path) -> int:
    """Write a tiny VoxCPM2 checkpoint into `out_dir`; return its parameters."""
    import mlx.core as mx
    from mlx_audio.tts.models.voxcpm2 import Model, ModelConfig

    tok = train_tokenizer(VOXCPM2_TOKENIZER, dims.vocab)
    config = voxcpm2_config(dims, id_of(tok))
    write_tokenizer_files(VOXCPM2_TOKENIZER, tok, out_dir, model_max_length=MAX_POSITIONS)
    write_json(out_dir / "config.json", config)
    write_json(out_dir / "generation_config.json", voxcpm2_generation_config(dims))
    mx.random.seed(SEED)
    weights = randomize(_flat_params(Model(ModelConfig.from_dict(config))))
    # Both stop logits 0: argmax is "continue", so lengths are max_tokens patches exactly.
    weights["stop_head.weight"][:] = 0.0
    return _save(weights, out_dir / "model.safetensors")


# -- MOSS-TTS-Nano -------------------------------------------------------------------------

MOSS_TTS_NANO_SIZES: Mapping[str, FamilyDims] = {
    "tiny": FamilyDims(
        hidden=64, layers=2, heads=4, kv_heads=4, intermediate=128, vocab=512, max_new_tokens=6
    ),
}
MOSS_N_VQ = 4
MOSS_CODEBOOK = 64
# MOSS's control ids (config.json defaults of the real checkpoint): 0 unk, 1 bos, 2 eos,
# 3 pad, then the chat and audio markers at 4-9.
MOSS_CONTROL_TOKENS = (
    "<|im_start|>",
    "<|im_end|>",
    "<|audio_start|>",
    "<|audio_end|>",
    "<|audio_user_slot|>",
    "<|audio_assistant_slot|>",
)
MOSS_SAMPLE_RATE = 8000
MOSS_DOWNSAMPLE = 640  # 12.5 codec frames a second, as the real one (48 kHz / 3840)


def _moss_transformer(d_in: int, d_out: int, d_model: int) -> dict[str, Any]:
    return {
        "module_type": "Transformer",
        "input_dimension": d_in,
        "output_dimension": d_out,
        "d_model": d_model,
        "num_heads": 2,
        "num_layers": 1,
        "dim_feedforward": 2 * d_model,
        "causal": True,
        "positional_embedding": "rope",
        "max_period": 10000,
        "layer_scale": 0.01,
        "norm": "layer_norm",
        "gating": "none",
        "conv_layout": True,
    }


def _patch(size: int) -> dict[str, Any]:
    return {"module_type": "PatchedPretransform", "patch_size": size}


# Stereo interleaved: 2 x 640 samples a frame = patches 8 * 8 * 20.
MOSS_AUDIO_TOKENIZER_CONFIG: dict[str, Any] = {
    "model_type": "moss-audio-tokenizer",
    "sample_rate": MOSS_SAMPLE_RATE,
    "sampling_rate": MOSS_SAMPLE_RATE,
    "downsample_rate": MOSS_DOWNSAMPLE,
    "causal_transformer_context_duration": 10.0,
    "number_channels": 2,
    "enable_channel_interleave": True,
    "encoder_kwargs": [
        _patch(8),
        _moss_transformer(8, 8, 16),
        _patch(8),
        _moss_transformer(64, 16, 32),
        _patch(20),
        _moss_transformer(320, 32, 32),
    ],
    "decoder_kwargs": [
        _moss_transformer(32, 320, 32),
        _patch(20),
        _moss_transformer(16, 64, 32),
        _patch(8),
        _moss_transformer(8, 8, 16),
        _patch(8),
    ],
    "quantizer_type": "rlfq",
    "quantizer_kwargs": {
        "quantizer_type": "rlfq",
        "input_dim": 32,
        "rvq_dim": 16,
        "output_dim": 32,
        "num_quantizers": MOSS_N_VQ,
        "codebook_size": MOSS_CODEBOOK,
        "codebook_dim": 8,
    },
}


def moss_tts_nano_config(d: FamilyDims, tid: Any = None) -> dict[str, Any]:
    # tid: unused (MOSS's ids are fixed by its config), kept for the Arch signature.
    return {
        "architectures": ["MossTTSNanoForCausalLM"],
        "model_type": "moss_tts_nano",
        "gpt2_config": {
            "model_type": "gpt2",
            "vocab_size": d.vocab,
            "n_positions": MAX_POSITIONS,
            "n_ctx": MAX_POSITIONS,
            "n_embd": d.hidden,
            "n_layer": d.layers,
            "n_head": d.heads,
            "n_inner": d.intermediate,
            "activation_function": "gelu_new",
            "layer_norm_epsilon": 1e-5,
            "position_embedding_type": "rope",
            "rope_base": 10000.0,
            "pad_token_id": 3,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "tie_word_embeddings": True,
        },
        "n_vq": MOSS_N_VQ,
        "audio_vocab_size": MOSS_CODEBOOK,
        "audio_codebook_sizes": [MOSS_CODEBOOK] * MOSS_N_VQ,
        "audio_pad_token_id": MOSS_CODEBOOK,
        "pad_token_id": 3,
        "im_start_token_id": 4,
        "im_end_token_id": 5,
        "audio_start_token_id": 6,
        "audio_end_token_id": 7,
        "audio_user_slot_token_id": 8,
        "audio_assistant_slot_token_id": 9,
        "audio_tokenizer_type": "moss-audio-tokenizer-nano",
        "audio_tokenizer_sample_rate": MOSS_SAMPLE_RATE,
        "local_transformer_layers": 1,
        "max_position_embeddings": MAX_POSITIONS,
        "hidden_size": d.hidden,
        "vocab_size": d.vocab,
    }


def moss_tts_nano_generation_config(d: FamilyDims) -> dict[str, Any]:
    # The engine passes max_new_tokens to generate() as max_tokens (codec frames).
    return {"max_new_tokens": d.max_new_tokens}


def _train_sentencepiece(vocab: int, out_file: Path) -> None:
    """A SentencePiece BPE model with MOSS's ids: unk 0, bos 1, eos 2, pad 3, markers 4-9."""
    import io

    import sentencepiece as spm

    text = "".join(stdlib_corpus(1 << 20))
    lines = [line for line in text.splitlines() if line.strip()]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=vocab,
        model_type="bpe",
        character_coverage=1.0,
        byte_fallback=True,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=3,
        user_defined_symbols=list(MOSS_CONTROL_TOKENS),
        num_threads=1,
        minloglevel=2,
        input_sentence_size=len(lines),
        shuffle_input_sentence=False,
    )
    out_file.write_bytes(model.getvalue())


def _moss_codec_weights() -> dict[str, np.ndarray]:
    """Random audio-tokenizer weights under the upstream names mlx-audio's sanitize renames."""
    import mlx.core as mx
    from mlx_audio.codec.models.moss_audio_tokenizer.moss_audio_tokenizer import (
        AudioTokenizerConfig,
        MossAudioTokenizer,
    )

    mx.random.seed(SEED)
    config = AudioTokenizerConfig.from_dict(MOSS_AUDIO_TOKENIZER_CONFIG)
    weights = randomize(_flat_params(MossAudioTokenizer(config)))
    out = {}
    for name, value in weights.items():
        if name.endswith("original0"):
            value = np.ones_like(value)  # weight-norm gains: unit-norm kernels
        name = name.replace(".ffn.0.weight", ".linear1.weight")
        name = name.replace(".ffn.2.weight", ".linear2.weight")
        name = name.replace(".self_attn.in_proj.weight", ".self_attn.in_projs.0.weight")
        name = name.replace(".self_attn.out_proj.weight", ".self_attn.out_projs.0.weight")
        out[name] = value
    return out


def build_moss_tts_nano(arch: Any, dims: FamilyDims, out_dir: Path) -> int:
    """Write a tiny MOSS-TTS-Nano checkpoint (with its audio tokenizer) into `out_dir`."""
    import mlx.core as mx
    from mlx_audio.tts.models.moss_tts_nano import Model, ModelConfig

    config = moss_tts_nano_config(dims)
    _train_sentencepiece(dims.vocab, out_dir / "tokenizer.model")
    write_json(out_dir / "config.json", config)
    write_json(out_dir / "generation_config.json", moss_tts_nano_generation_config(dims))
    mx.random.seed(SEED)
    weights = randomize(_flat_params(Model(ModelConfig.from_dict(config))))
    # The text head (tied to wte) only chooses between "audio slot" (go on) and "audio end".
    # The local transformer's final norm adds a bias b to every hidden state; the slot row is
    # along b, the end row zero: the slot logit is then ~|b|^2 / 4 > 0 = the end logit.
    bias = np.full(dims.hidden, 4.0, np.float32)
    weights["local_transformer.ln_f.bias"] = bias
    wte = weights["transformer.wte.weight"]
    wte[config["audio_assistant_slot_token_id"]] = bias / 4.0
    wte[config["audio_end_token_id"]] = 0.0
    n_params = _save(weights, out_dir / "model.safetensors")
    codec_dir = out_dir / "audio_tokenizer"
    codec_dir.mkdir()
    write_json(codec_dir / "config.json", MOSS_AUDIO_TOKENIZER_CONFIG)
    return n_params + _save(_moss_codec_weights(), codec_dir / "model.safetensors")
