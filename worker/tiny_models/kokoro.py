"""A tiny random-weight Kokoro checkpoint, in the layout mlx-audio's Kokoro loader reads.

Weights are random but deterministic (see `worker.tiny_models.tts.randomize`); the layout is
described below, where the builder starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from worker.convert.kokoro_layout import KOKORO_82M, KOKORO_82M_VOCAB, upstream_name, upstream_value
from worker.tiny_models.tokenizer import write_json
from worker.tiny_models.tts import SEED, _flat_params, _save, randomize

# -- Kokoro --------------------------------------------------------------------------------
# Kokoro-82M's layout as mlx-audio reads it: `config.json` (`model_type: kokoro`, the PL-BERT
# `plbert` section, `istftnet`, Kokoro-82M's own phoneme `vocab`), one `*.safetensors` with the
# upstream (PyTorch) tensor names that mlx-audio's sanitize converts (worker/convert/kokoro_layout.py,
# which the converter of the real weights uses too), and voice
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
# The preset voices written: English, Spanish and French (all read through espeak-ng).
KOKORO_VOICES = ("af_heart", "ef_dora", "ff_siwis")
KOKORO_STYLE_DIM = 128  # fixed by mlx-audio (ref_s[:, :128] | ref_s[:, 128:])
KOKORO_PACK_LENGTH = 510  # one style per phoneme count, as the real packs
KOKORO_POST_GAIN = 0.05


def kokoro_config(d: KokoroDims, tid: Any = None) -> dict[str, Any]:
    """Kokoro-82M's config (worker/convert/kokoro_layout.py) with one resblock kernel, a shallower
    encoder, a tiny PL-BERT, short durations and Kokoro-82M's own vocabulary."""
    # tid: unused (the vocabulary is Kokoro-82M's), kept for the Arch signature.
    real = KOKORO_82M
    return {
        **real,
        "istftnet": {
            **real["istftnet"],
            "resblock_dilation_sizes": [[1, 3, 5]],
            "resblock_kernel_sizes": [3],
        },  # fmt: skip
        "max_dur": d.max_dur,
        "n_layer": d.n_layer,
        "plbert": {
            **real["plbert"],
            "hidden_size": d.bert_hidden,
            "num_attention_heads": d.bert_heads,
            "intermediate_size": d.bert_intermediate,
            "num_hidden_layers": d.bert_layers,
        },
        "vocab": dict(KOKORO_82M_VOCAB),  # the real one: real phonemes get their real ids
    }


def kokoro_generation_config(d: Any = None) -> dict[str, Any]:
    return {}  # Kokoro ships none: its length follows the phonemes


def kokoro_voice_pack(name: str) -> np.ndarray:
    """A random voice pack [510, 1, 256] for `name`, deterministic per name."""
    from worker.tiny_models.tts import _random

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
        upstream[upstream_name(name)] = upstream_value(name, value)
    n_params = _save(upstream, out_dir / "kokoro-v1_0.safetensors")
    voices = out_dir / "voices"
    voices.mkdir()
    for voice in KOKORO_VOICES:
        save_file({"voice": kokoro_voice_pack(voice)}, str(voices / f"{voice}.safetensors"))
    return n_params
