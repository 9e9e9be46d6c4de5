"""CTranslate2 Whisper variables -> the Hugging Face Whisper layout, and its config files.

CTranslate2 fuses projections that Hugging Face keeps apart: a self-attention's
`linear_0` is [q; k; v] and a cross-attention's `linear_1` is [k; v] (its `linear_0` is q and
`linear_2` the output). Whisper's key projections have no bias; CTranslate2 stores zeros there,
which are dropped (a key bias adds the same q.b to every score of a query, which softmax
ignores, so dropping it is exact even if it were not zero). Layer norms are `gamma` / `beta`.
The output projection is an alias of the token embedding (Whisper ties them).

Every variable of the file is either mapped, checked (the flags of WhisperSpec) or named in an
error: nothing is dropped silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from worker.convert.ct2_format import Ct2Model
from worker.convert.errors import ConversionError
from worker.convert.output import PlannedTensor

GELU = 3  # CTranslate2's Activation enum value for exact GELU, Whisper's
# Flags of WhisperSpec and the value Whisper needs; the alignment ones are informational.
EXPECTED_FLAGS = {
    "decoder/activation": GELU,
    "decoder/pre_norm": 1,
    "decoder/scale_embeddings": 0,
    "decoder/alibi": 0,
    "decoder/start_from_zero_embedding": 0,
}
IGNORED = {
    "decoder/alignment_heads",
    "decoder/alignment_layer",
    "encoder/num_heads",
    "decoder/num_heads",
}
LAYER = re.compile(r"^(encoder|decoder)/layer_(\d+)/")


@dataclass(frozen=True)
class WhisperDims:
    """The shape of the model, read from its variables."""

    n_mels: int
    d_model: int
    encoder_layers: int
    decoder_layers: int
    encoder_heads: int
    decoder_heads: int
    encoder_ffn: int
    decoder_ffn: int
    n_audio_ctx: int
    n_text_ctx: int
    vocab_size: int


def dims(model: Ct2Model) -> WhisperDims:
    if model.spec != "WhisperSpec":
        raise ConversionError(f"model.bin holds a {model.spec}, not a WhisperSpec")

    def shape(name: str) -> tuple[int, ...]:
        value = model.get(name)
        if value is None:
            raise ConversionError(f"model.bin lacks {name}")
        return value.shape

    def layers(stack: str) -> int:
        found = {
            int(m.group(2))
            for n in model.variables
            if (m := LAYER.match(n)) and m.group(1) == stack
        }
        if found != set(range(len(found))) or not found:
            raise ConversionError(f"{stack} layers {sorted(found)} are not 0..n-1")
        return len(found)

    def heads(stack: str) -> int:
        value = model.scalar(f"{stack}/num_heads")
        if value is None:
            raise ConversionError(f"model.bin lacks {stack}/num_heads")
        return value

    conv1 = shape("encoder/conv1/weight")
    return WhisperDims(
        n_mels=conv1[1],
        d_model=conv1[0],
        encoder_layers=layers("encoder"),
        decoder_layers=layers("decoder"),
        encoder_heads=heads("encoder"),
        decoder_heads=heads("decoder"),
        encoder_ffn=shape("encoder/layer_0/ffn/linear_0/weight")[0],
        decoder_ffn=shape("decoder/layer_0/ffn/linear_0/weight")[0],
        n_audio_ctx=shape("encoder/position_encodings/encodings")[0],
        n_text_ctx=shape("decoder/position_encodings/encodings")[0],
        vocab_size=shape("decoder/embeddings/weight")[0],
    )


class _Mapper:
    """Collects planned tensors and remembers which source variables were used."""

    def __init__(self, model: Ct2Model, d_model: int) -> None:
        self.model = model
        self.d = d_model
        self.used: set[str] = set()
        self.planned: list[PlannedTensor] = []

    def source(self, name: str) -> np.ndarray:
        try:
            value = self.model.weight(name)
        except KeyError:
            raise ConversionError(f"model.bin lacks {name}") from None
        self.used.update({name, f"{name}_scale"})
        return value

    def copy(self, hf: str, ct2: str) -> None:
        value = self.source(ct2)
        self.planned.append(PlannedTensor(hf, value.shape, lambda: value))

    def split(self, hf_prefix: str, ct2: str, names: tuple[str, ...]) -> None:
        """A fused projection [a; b; ...] (d rows each) -> one weight (and bias) per name."""
        weight, bias = self.source(f"{ct2}/weight"), self.source(f"{ct2}/bias")
        if weight.shape[0] != self.d * len(names) or bias.shape != (weight.shape[0],):
            raise ConversionError(f"{ct2}: shape {weight.shape} is not {len(names)} fused")
        for i, name in enumerate(names):
            rows = slice(i * self.d, (i + 1) * self.d)
            self._add(f"{hf_prefix}.{name}.weight", weight[rows])
            if name != "k_proj":  # Whisper's keys have no bias (see the module docstring)
                self._add(f"{hf_prefix}.{name}.bias", bias[rows])

    def linear(self, hf: str, ct2: str) -> None:
        self.copy(f"{hf}.weight", f"{ct2}/weight")
        self.copy(f"{hf}.bias", f"{ct2}/bias")

    def norm(self, hf: str, ct2: str) -> None:
        self.copy(f"{hf}.weight", f"{ct2}/gamma")
        self.copy(f"{hf}.bias", f"{ct2}/beta")

    def _add(self, name: str, value: np.ndarray) -> None:
        self.planned.append(PlannedTensor(name, value.shape, lambda: value))


def planned_tensors(model: Ct2Model, shape: WhisperDims) -> list[PlannedTensor]:
    """The Hugging Face WhisperForConditionalGeneration tensors (`model.` prefix)."""
    for name, expected in EXPECTED_FLAGS.items():
        value = model.scalar(name)
        if value is not None and value != expected:
            raise ConversionError(f"{name} is {value}; Whisper needs {expected}")
    projection = model.aliases.get("decoder/projection/weight")
    if projection is None and "decoder/projection/weight" in model.variables:
        untied = model.variables["decoder/projection/weight"]
        if not np.array_equal(untied, model.variables["decoder/embeddings/weight"]):
            raise ConversionError("the output projection is not tied to the token embedding")
    elif projection not in (None, "decoder/embeddings/weight"):
        raise ConversionError(f"decoder/projection/weight aliases {projection}")

    m = _Mapper(model, shape.d_model)
    enc, dec = "model.encoder", "model.decoder"
    m.linear(f"{enc}.conv1", "encoder/conv1")
    m.linear(f"{enc}.conv2", "encoder/conv2")
    m.copy(f"{enc}.embed_positions.weight", "encoder/position_encodings/encodings")
    m.norm(f"{enc}.layer_norm", "encoder/layer_norm")
    m.copy(f"{dec}.embed_tokens.weight", "decoder/embeddings/weight")
    m.copy(f"{dec}.embed_positions.weight", "decoder/position_encodings/encodings")
    m.norm(f"{dec}.layer_norm", "decoder/layer_norm")
    for stack, hf, n_layers in (
        ("encoder", enc, shape.encoder_layers),
        ("decoder", dec, shape.decoder_layers),
    ):
        for i in range(n_layers):
            src, out = f"{stack}/layer_{i}", f"{hf}.layers.{i}"
            m.norm(f"{out}.self_attn_layer_norm", f"{src}/self_attention/layer_norm")
            m.split(
                f"{out}.self_attn", f"{src}/self_attention/linear_0", ("q_proj", "k_proj", "v_proj")
            )
            m.linear(f"{out}.self_attn.out_proj", f"{src}/self_attention/linear_1")
            if stack == "decoder":
                m.norm(f"{out}.encoder_attn_layer_norm", f"{src}/attention/layer_norm")
                m.linear(f"{out}.encoder_attn.q_proj", f"{src}/attention/linear_0")
                m.split(f"{out}.encoder_attn", f"{src}/attention/linear_1", ("k_proj", "v_proj"))
                m.linear(f"{out}.encoder_attn.out_proj", f"{src}/attention/linear_2")
            m.norm(f"{out}.final_layer_norm", f"{src}/ffn/layer_norm")
            m.linear(f"{out}.fc1", f"{src}/ffn/linear_0")
            m.linear(f"{out}.fc2", f"{src}/ffn/linear_1")

    known = m.used | set(EXPECTED_FLAGS) | IGNORED | {"decoder/projection/weight"}
    unused = sorted(set(model.variables) - known)
    if unused:
        raise ConversionError(f"model.bin variables with no Hugging Face counterpart: {unused}")
    return m.planned


@dataclass(frozen=True)
class SpecialIds:
    """Whisper's special token ids, from the tokenizer."""

    eot: int
    sot: int
    translate: int
    transcribe: int
    sot_prev: int
    no_timestamps: int
    languages: dict[str, int]  # "<|en|>" -> id, in id order; empty for English-only models


def model_config(
    shape: WhisperDims, ids: SpecialIds, ct2_config: dict[str, Any], dtype: str
) -> dict[str, Any]:
    """config.json as transformers' WhisperConfig writes it."""
    return {
        "activation_dropout": 0.0,
        "activation_function": "gelu",
        "architectures": ["WhisperForConditionalGeneration"],
        "attention_dropout": 0.0,
        "begin_suppress_tokens": ct2_config.get("suppress_ids_begin", [220, ids.eot]),
        "bos_token_id": ids.eot,
        "d_model": shape.d_model,
        "decoder_attention_heads": shape.decoder_heads,
        "decoder_ffn_dim": shape.decoder_ffn,
        "decoder_layers": shape.decoder_layers,
        "decoder_start_token_id": ids.sot,
        "dropout": 0.0,
        "encoder_attention_heads": shape.encoder_heads,
        "encoder_ffn_dim": shape.encoder_ffn,
        "encoder_layers": shape.encoder_layers,
        "eos_token_id": ids.eot,
        "is_encoder_decoder": True,
        "max_length": shape.n_text_ctx,
        "max_source_positions": shape.n_audio_ctx,
        "max_target_positions": shape.n_text_ctx,
        "model_type": "whisper",
        "num_hidden_layers": shape.encoder_layers,
        "num_mel_bins": shape.n_mels,
        "pad_token_id": ids.eot,
        "scale_embedding": False,
        "suppress_tokens": ct2_config.get("suppress_ids", []),
        "torch_dtype": dtype,
        "use_cache": True,
        "vocab_size": shape.vocab_size,
    }


def generation_config(
    shape: WhisperDims, ids: SpecialIds, ct2_config: dict[str, Any]
) -> dict[str, Any]:
    """generation_config.json: alignment heads (word timestamps), special ids, languages."""
    heads = ct2_config.get("alignment_heads") or [
        [layer, head]
        for layer in range(shape.decoder_layers // 2, shape.decoder_layers)
        for head in range(shape.decoder_heads)
    ]
    config: dict[str, Any] = {
        "alignment_heads": heads,
        "begin_suppress_tokens": ct2_config.get("suppress_ids_begin", [220, ids.eot]),
        "bos_token_id": ids.eot,
        "decoder_start_token_id": ids.sot,
        "eos_token_id": ids.eot,
        "is_multilingual": bool(ids.languages),
        "max_initial_timestamp_index": 50,
        "max_length": shape.n_text_ctx,
        "no_timestamps_token_id": ids.no_timestamps,
        "pad_token_id": ids.eot,
        "prev_sot_token_id": ids.sot_prev,
        "return_timestamps": False,
        "suppress_tokens": ct2_config.get("suppress_ids", []),
    }
    if ids.languages:
        config["lang_to_id"] = ids.languages
        config["task_to_id"] = {"transcribe": ids.transcribe, "translate": ids.translate}
    return config


def preprocessor_config(n_mels: int) -> dict[str, Any]:
    """preprocessor_config.json: Whisper's log-mel feature extractor (30 s windows) over
    `n_mels` mel bins."""
    return {
        "chunk_length": 30,
        "feature_extractor_type": "WhisperFeatureExtractor",
        "feature_size": n_mels,
        "hop_length": 160,
        "n_fft": 400,
        "n_samples": 480000,
        "nb_max_frames": 3000,
        "padding_side": "right",
        "padding_value": 0.0,
        "processor_class": "WhisperProcessor",
        "return_attention_mask": False,
        "sampling_rate": 16000,
    }
