"""Tiny random-weight text-to-speech checkpoints in the on-disk format mlx-audio loads.

Two families, each written the way a converted (mlx-community) checkpoint is laid out and read
back through mlx-audio's own `load_model` path (config, sanitize, post-load hook):

- `qwen3_tts` (Qwen3-TTS CustomVoice): `config.json` (talker, code predictor, preset speakers
  and languages), `model.safetensors` with the MLX parameter names, a Qwen2-style byte-level BPE
  tokenizer carrying the TTS control tokens, `generation_config.json`, and the codec in
  `speech_tokenizer/` (its own `config.json` and Hugging Face-named `model.safetensors`: the
  codebooks as `cluster_usage` / `embedding_sum`, which mlx-audio's sanitize turns into
  embeddings).
- `soprano` (Soprano-80M layout): a Qwen3 language model plus a Vocos decoder in one
  `model.safetensors`, and a tokenizer with Soprano's `[STOP]`, `[TEXT]`, `[START]` markers.

Weights are random but deterministic (numpy, seeded per tensor name). Random models never pick
their stop token on purpose, so `generation_config.json` caps every request at a few codec
frames (`max_new_tokens`): lengths are then fixed, which the equivalence tests rely on.

mlx and mlx-audio are imported inside the builders only, so `scripts.tiny_checkpoint` (which
registers these builders) stays importable without them.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scripts.tiny_tokenizer import QWEN2, TokenizerSpec, train_tokenizer, write_tokenizer_files

SEED = 0
TEXT_VOCAB = 4096
MAX_POSITIONS = 4096

# Qwen3-TTS marks text with these three tokens (ids 151671-151673 in the real vocabulary).
QWEN3_TTS_TOKENIZER = dataclasses.replace(
    QWEN2,
    added_tokens=QWEN2.added_tokens
    + (("<tts_pad>", True), ("<tts_text_bos>", True), ("<tts_text_eod>", True)),
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

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


QWEN3_TTS_SIZES: Mapping[str, TtsDims] = {
    "tiny": TtsDims(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, max_new_tokens=6),
    # The same model speaking longer (40 frames, 3.2 s): for benchmarks (scripts/bench_speech.py).
    "bench": TtsDims(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, max_new_tokens=40),
}
SOPRANO_SIZES: Mapping[str, TtsDims] = {
    "tiny": TtsDims(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, max_new_tokens=10),
    "bench": TtsDims(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, max_new_tokens=64),
}


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


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


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
        "sample_rate": 8000,
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
            "text_hidden_size": d.hidden,
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
                "num_hidden_layers": 1,
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


def _speech_tokenizer_weights() -> dict[str, np.ndarray]:
    """Random codec weights under the Hugging Face names mlx-audio's sanitize expects."""
    from mlx_audio.tts.models.qwen3_tts.config import Qwen3TTSTokenizerConfig
    from mlx_audio.tts.models.qwen3_tts.qwen3_tts import check_array_shape_qwen3
    from mlx_audio.tts.models.qwen3_tts.speech_tokenizer import Qwen3TTSSpeechTokenizer

    config = Qwen3TTSTokenizerConfig(decoder_config=dict(SPEECH_TOKENIZER_CONFIG["decoder_config"]))
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
    import mlx.core as mx
    from mlx_audio.tts.models.qwen3_tts.config import ModelConfig
    from mlx_audio.tts.models.qwen3_tts.qwen3_tts import Model

    tok = train_tokenizer(QWEN3_TTS_TOKENIZER, TEXT_VOCAB)
    config = qwen3_tts_config(dims, tok.token_to_id)
    write_tokenizer_files(QWEN3_TTS_TOKENIZER, tok, out_dir, model_max_length=MAX_POSITIONS)
    _write_json(out_dir / "config.json", config)
    _write_json(out_dir / "generation_config.json", qwen3_tts_generation_config(dims))
    mx.random.seed(SEED)  # module initialisers draw from it; randomize() overwrites those
    weights = randomize(_flat_params(Model(ModelConfig.from_dict(config))))
    # A zero codec-head row gives the codec's end token logit 0 while the top-k candidates'
    # logits are well above it: a random model never ends early, max_new_tokens fixes lengths.
    weights["talker.codec_head.weight"][config["talker_config"]["codec_eos_token_id"]] = 0.0
    n_params = _save(weights, out_dir / "model.safetensors")
    codec_dir = out_dir / "speech_tokenizer"
    codec_dir.mkdir()
    _write_json(codec_dir / "config.json", SPEECH_TOKENIZER_CONFIG)
    return n_params + _save(_speech_tokenizer_weights(), codec_dir / "model.safetensors")


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
    config = soprano_config(dims, tok.token_to_id)
    write_tokenizer_files(SOPRANO_TOKENIZER, tok, out_dir, model_max_length=MAX_POSITIONS)
    _write_json(out_dir / "config.json", config)
    _write_json(out_dir / "generation_config.json", soprano_generation_config(dims))
    mx.random.seed(SEED)
    # Soprano's loader sizes the decoder from the checkpoint's path; build it the same way.
    model = Model(ModelConfig.from_dict({**config, "model_path": str(out_dir)}))
    weights = randomize(_flat_params(model))
    stop = tok.token_to_id("[STOP]")
    # A zero output row gives the stop token logit 0 while others spread widely: a random
    # model then practically never stops on its own, and max_new_tokens fixes the length.
    weights["language_model.lm_head.weight"][stop] = 0.0
    return _save(weights, out_dir / "model.safetensors")
