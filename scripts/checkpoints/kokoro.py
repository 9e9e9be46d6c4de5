"""A tiny random-weight Kokoro checkpoint, in the layout mlx-audio's Kokoro loader reads.

Weights are random but deterministic (see `scripts.checkpoints.tts.randomize`); the layout is
described below, where the builder starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scripts.checkpoints.tokenizer import write_json
from scripts.checkpoints.tts import SEED, _flat_params, _save, randomize

# -- Kokoro --------------------------------------------------------------------------------
# Kokoro-82M's layout as mlx-audio reads it: `config.json` (`model_type: kokoro`, the PL-BERT
# `plbert` section, `istftnet`, the phoneme `vocab`), one `*.safetensors` with the upstream
# (PyTorch) tensor names that mlx-audio's sanitize converts (`weight_ih_l0` / `_reverse` LSTM
# weights, `gamma` / `beta` layer norms, `(out, in, kernel)` convolution kernels), and voice
# packs `voices/<name>.safetensors`, each one `voice` tensor [510, 1, 256]: a style vector per
# phoneme count (decoder style | prosody style). The language of a voice is its name's first
# letter. mlx-audio fixes the decoder's widths (1024 / 512 channels, 128-wide styles), so the
# checkpoint shrinks only PL-BERT, the layer counts and the maximum duration per phoneme
# (`max_dur` frames: short, so that audio stays short).


@dataclass(frozen=True)
class KokoroDims:
    """Shape of a tiny Kokoro checkpoint: PL-BERT, encoder depth, frames per phoneme."""

    bert_hidden: int
    bert_layers: int
    bert_heads: int
    bert_intermediate: int
    n_layer: int
    max_dur: int


KOKORO_SIZES: Mapping[str, KokoroDims] = {
    "tiny": KokoroDims(
        bert_hidden=32, bert_layers=1, bert_heads=2, bert_intermediate=64, n_layer=1, max_dur=2
    ),
}
# The preset voices written: English (needs misaki[en]), Spanish and French (espeak-ng).
KOKORO_VOICES = ("af_heart", "ef_dora", "ff_siwis")
KOKORO_N_TOKEN = 178
# Phoneme symbols misaki produces (punctuation, ASCII, IPA, misaki's diphthong letters).
KOKORO_SYMBOLS = (
    ';:,.!?¡¿—…"«»“” ()'
    "\u0303ʣʥʦʨᵝ\uab67AIOQSTWYᵊabcdefhijklmnopqrstuvwxyz"
    "ɑɐɒæβɔɕçɖðʤəɚɛɜɟɡɥɨɪʝɯɰŋɳɲɴøɸθœɹɾɻʁɽʂʃʈʧʊʋʌɣɤχʎʒʔˈˌːʰʲ↓→↗↘ᵻ"
)
KOKORO_STYLE_DIM = 128  # fixed by mlx-audio (ref_s[:, :128] | ref_s[:, 128:])
KOKORO_PACK_LENGTH = 510  # one style per phoneme count, as the real packs
KOKORO_POST_GAIN = 0.05
_LSTM_NAMES = {
    "Wx_forward": "weight_ih_l0",
    "Wh_forward": "weight_hh_l0",
    "bias_ih_forward": "bias_ih_l0",
    "bias_hh_forward": "bias_hh_l0",
    "Wx_backward": "weight_ih_l0_reverse",
    "Wh_backward": "weight_hh_l0_reverse",
    "bias_ih_backward": "bias_ih_l0_reverse",
    "bias_hh_backward": "bias_hh_l0_reverse",
}


def kokoro_config(d: KokoroDims, tid: Any = None) -> dict[str, Any]:
    # tid: unused (the vocabulary is the phoneme table below), kept for the Arch signature.
    return {
        "model_type": "kokoro",
        "istftnet": {
            "upsample_kernel_sizes": [20, 12],
            "upsample_rates": [10, 6],
            "gen_istft_hop_size": 5,
            "gen_istft_n_fft": 20,
            "resblock_dilation_sizes": [[1, 3, 5]],
            "resblock_kernel_sizes": [3],
            "upsample_initial_channel": 512,
        },
        "dim_in": 64,
        "dropout": 0.2,
        "hidden_dim": 512,
        "max_conv_dim": 512,
        "max_dur": d.max_dur,
        "multispeaker": True,
        "n_layer": d.n_layer,
        "n_mels": 80,
        "n_token": KOKORO_N_TOKEN,
        "style_dim": KOKORO_STYLE_DIM,
        "text_encoder_kernel_size": 5,
        "plbert": {
            "hidden_size": d.bert_hidden,
            "num_attention_heads": d.bert_heads,
            "intermediate_size": d.bert_intermediate,
            "max_position_embeddings": 512,
            "num_hidden_layers": d.bert_layers,
            "dropout": 0.1,
        },
        "vocab": {symbol: i + 1 for i, symbol in enumerate(KOKORO_SYMBOLS)},
        "sample_rate": 24000,
    }


def kokoro_generation_config(d: Any = None) -> dict[str, Any]:
    return {}  # Kokoro ships none: its length follows the phonemes


def kokoro_upstream_name(name: str) -> str:
    """The upstream (PyTorch) name of an mlx-audio Kokoro parameter."""
    head, _, leaf = name.rpartition(".")
    if leaf in _LSTM_NAMES:
        return f"{head}.{_LSTM_NAMES[leaf]}"
    parts = name.split(".")
    # The text encoder's layer norms (cnn.<i>.1) are upstream's gamma / beta LayerNorm.
    if parts[:2] == ["text_encoder", "cnn"] and parts[3] == "1":
        return f"{head}.{'gamma' if leaf == 'weight' else 'beta'}"
    return name


def kokoro_upstream_value(name: str, value: np.ndarray) -> np.ndarray:
    """An MLX-layout Kokoro parameter in the layout upstream stores (what sanitize undoes)."""
    from mlx_audio.tts.models.base import check_array_shape

    if name.startswith("predictor.") and name.endswith(("F0_proj.weight", "N_proj.weight")):
        return np.ascontiguousarray(value.transpose(0, 2, 1))
    if name.startswith("decoder.") and "noise_convs" in name and name.endswith(".weight"):
        return np.ascontiguousarray(value.transpose(0, 2, 1))
    if name.endswith(".weight_v"):
        torch_layout = value.transpose(0, 2, 1)  # (out, kernel, in) -> (out, in, kernel)
        # sanitize keeps a kernel that already "looks" MLX-shaped; such a one is written as is.
        if not check_array_shape(torch_layout):
            return np.ascontiguousarray(torch_layout)
    return value


def kokoro_voice_pack(name: str) -> np.ndarray:
    """A random voice pack [510, 1, 256] for `name`, deterministic per name."""
    from scripts.checkpoints.tts import _random

    return _random(f"voice.{name}", (KOKORO_PACK_LENGTH, 1, 2 * KOKORO_STYLE_DIM), 0.3)


def build_kokoro(arch: Any, dims: KokoroDims, out_dir: Path) -> int:
    """Write a tiny Kokoro checkpoint (weights, config, voice packs) into `out_dir`."""
    import mlx.core as mx
    from mlx_audio.tts.models.kokoro import Model, ModelConfig
    from safetensors.numpy import save_file

    config = kokoro_config(dims)
    write_json(out_dir / "config.json", config)
    mx.random.seed(SEED)  # LSTM biases keep their (random) initial values
    weights = randomize(_flat_params(Model(ModelConfig.from_dict(config))))
    upstream = {}
    for name, value in weights.items():
        if name.endswith(".weight_g"):
            value = np.ones_like(value)  # weight-norm gains: unit-norm kernels
        if name == "decoder.generator.conv_post.weight_g":
            # Its output is exp()'d into the magnitude spectrum: a small gain keeps the audio
            # within [-1, 1] instead of clipping.
            value = np.full_like(value, KOKORO_POST_GAIN)
        upstream[kokoro_upstream_name(name)] = kokoro_upstream_value(name, value)
    n_params = _save(upstream, out_dir / "kokoro-v1_0.safetensors")
    voices = out_dir / "voices"
    voices.mkdir()
    for voice in KOKORO_VOICES:
        save_file({"voice": kokoro_voice_pack(voice)}, str(voices / f"{voice}.safetensors"))
    return n_params
