"""Tiny CTranslate2 Whisper models written by the tests, and Whisper's forward pass in numpy.

`write_model_bin` is a writer of CTranslate2's model.bin format of its own (the converter's
reader is tested against it): binary version, spec name and revision, named variables with
dtype and shape, aliases. `write_tiny_whisper` lays out a whole CTranslate2 Whisper directory
as faster-whisper packages ship it: model.bin (optionally split into parts) with CTranslate2's
fused projections, config.json, and a tokenizer.json without the timestamp tokens.
`encoder_reference` / `decoder_reference` run Whisper on those variables in float64.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DTYPE_IDS = {"float32": 0, "int8": 1, "int16": 2, "int32": 3, "float16": 4}
LEGACY_ITEM_SIZES = {"float32": 4, "int16": 2, "int8": 1}
WHISPER_SPECIALS = (
    "<|endoftext|>",
    "<|startoftranscript|>",
    "<|en|>",
    "<|de|>",
    "<|translate|>",
    "<|transcribe|>",
    "<|startoflm|>",
    "<|startofprev|>",
    "<|nocaptions|>",
    "<|notimestamps|>",
)
TIMESTAMPS = 1501


def _string(text: str) -> bytes:
    raw = text.encode() + b"\0"
    return struct.pack("<H", len(raw)) + raw


def model_bin_bytes(
    spec: str,
    variables: dict[str, np.ndarray],
    aliases: dict[str, str] | None = None,
    revision: int = 3,
    version: int = 6,
) -> bytes:
    """A model.bin of `version` (6 as CTranslate2 writes today; 3 has item sizes, not ids)."""
    out = [struct.pack("<I", version), _string(spec), struct.pack("<I", revision)]
    out.append(struct.pack("<I", len(variables)))
    for name, value in variables.items():
        value = np.ascontiguousarray(value)
        out += [_string(name), struct.pack("<B", value.ndim)]
        out += [struct.pack("<I", d) for d in value.shape]
        if version >= 4:
            out.append(struct.pack("<BI", DTYPE_IDS[value.dtype.name], value.nbytes))
        else:
            out.append(struct.pack("<BI", LEGACY_ITEM_SIZES[value.dtype.name], value.size))
        out.append(value.astype(value.dtype.newbyteorder("<")).tobytes())
    aliases = aliases or {}
    out.append(struct.pack("<I", len(aliases)))
    for alias, target in aliases.items():
        out += [_string(alias), _string(target)]
    return b"".join(out)


def write_model_bin(directory: Path, data: bytes, parts: int = 1) -> list[Path]:
    """model.bin in `directory`, or model.bin.part1 .. partN (nearly equal pieces)."""
    directory.mkdir(parents=True, exist_ok=True)
    if parts == 1:
        (directory / "model.bin").write_bytes(data)
        return [directory / "model.bin"]
    cuts = np.linspace(0, len(data), parts + 1).astype(int)
    paths = []
    for i in range(parts):
        path = directory / f"model.bin.part{i + 1}"
        path.write_bytes(data[cuts[i] : cuts[i + 1]])
        paths.append(path)
    return paths


@dataclass(frozen=True)
class TinyWhisper:
    n_mels: int = 80
    d_model: int = 32
    n_head: int = 2
    encoder_layers: int = 2
    decoder_layers: int = 2
    n_audio_ctx: int = 8  # encoder positions: the mel input has twice as many frames
    n_text_ctx: int = 16


def sinusoids(length: int, channels: int) -> np.ndarray:
    """Whisper's encoder positions."""
    increment = math.log(10000) / (channels // 2 - 1)
    inv = np.exp(-increment * np.arange(channels // 2))
    scaled = np.arange(length)[:, None] * inv[None, :]
    return np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1)


def train_tokenizer() -> Any:
    """A GPT-2-style byte-level BPE with Whisper's special tokens (no timestamps) after it."""
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(
        ["the quick brown fox jumps over the lazy dog. Paris, France."] * 8, trainer
    )
    tok.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in WHISPER_SPECIALS]
    )
    ids = {
        t: tok.token_to_id(t)
        for t in ("<|startoftranscript|>", "<|notimestamps|>", "<|endoftext|>")
    }
    tok.post_processor = processors.TemplateProcessing(
        single="<|startoftranscript|> <|notimestamps|> $A <|endoftext|>",
        special_tokens=list(ids.items()),
    )
    return tok


def whisper_variables(
    spec: TinyWhisper, vocab_size: int, seed: int = 0, dtype: str = "float16"
) -> dict[str, np.ndarray]:
    """CTranslate2 WhisperSpec variables: fused [q; k; v] and [k; v], zero key biases."""
    rng = np.random.default_rng(seed)
    d, ffn = spec.d_model, 4 * spec.d_model

    def rand(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(dtype)

    def norm(prefix: str) -> None:
        v[f"{prefix}/gamma"] = (1 + rand(d, scale=0.1)).astype(dtype)
        v[f"{prefix}/beta"] = rand(d, scale=0.1)

    def linear(prefix: str, rows: int, cols: int, zero_rows: slice | None = None) -> None:
        v[f"{prefix}/weight"] = rand(rows, cols, scale=cols**-0.5)
        bias = rand(rows, scale=0.1)
        if zero_rows is not None:
            bias[zero_rows] = 0  # Whisper's key projection has no bias
        v[f"{prefix}/bias"] = bias

    v: dict[str, np.ndarray] = {
        "decoder/activation": np.array(3, dtype=np.int8),
        "decoder/alibi": np.array(0, dtype=np.int8),
        "decoder/alignment_heads": np.array(1, dtype=np.int16),
        "decoder/alignment_layer": np.array(-1, dtype=np.int16),
        "decoder/embeddings/weight": rand(vocab_size, d, scale=0.5),
    }
    for i in range(spec.decoder_layers):
        p = f"decoder/layer_{i}"
        norm(f"{p}/attention/layer_norm")
        linear(f"{p}/attention/linear_0", d, d)
        linear(f"{p}/attention/linear_1", 2 * d, d, zero_rows=slice(0, d))
        linear(f"{p}/attention/linear_2", d, d)
        norm(f"{p}/ffn/layer_norm")
        linear(f"{p}/ffn/linear_0", ffn, d)
        linear(f"{p}/ffn/linear_1", d, ffn)
        norm(f"{p}/self_attention/layer_norm")
        linear(f"{p}/self_attention/linear_0", 3 * d, d, zero_rows=slice(d, 2 * d))
        linear(f"{p}/self_attention/linear_1", d, d)
    norm("decoder/layer_norm")
    v["decoder/num_heads"] = np.array(spec.n_head, dtype=np.int16)
    v["decoder/position_encodings/encodings"] = rand(spec.n_text_ctx, d, scale=0.1)
    v["decoder/pre_norm"] = np.array(1, dtype=np.int8)
    v["decoder/scale_embeddings"] = np.array(0, dtype=np.int8)
    v["decoder/start_from_zero_embedding"] = np.array(0, dtype=np.int8)
    linear("encoder/conv1", d, spec.n_mels * 3)
    v["encoder/conv1/weight"] = v["encoder/conv1/weight"].reshape(d, spec.n_mels, 3)
    linear("encoder/conv2", d, d * 3)
    v["encoder/conv2/weight"] = v["encoder/conv2/weight"].reshape(d, d, 3)
    for i in range(spec.encoder_layers):
        p = f"encoder/layer_{i}"
        norm(f"{p}/ffn/layer_norm")
        linear(f"{p}/ffn/linear_0", ffn, d)
        linear(f"{p}/ffn/linear_1", d, ffn)
        norm(f"{p}/self_attention/layer_norm")
        linear(f"{p}/self_attention/linear_0", 3 * d, d, zero_rows=slice(d, 2 * d))
        linear(f"{p}/self_attention/linear_1", d, d)
    norm("encoder/layer_norm")
    v["encoder/num_heads"] = np.array(spec.n_head, dtype=np.int16)
    v["encoder/position_encodings/encodings"] = sinusoids(spec.n_audio_ctx, d).astype(dtype)
    return v


ALIASES = {"decoder/projection/weight": "decoder/embeddings/weight"}


def write_tiny_whisper(
    directory: Path, spec: TinyWhisper | None = None, parts: int = 1, seed: int = 0
) -> dict[str, Any]:
    """A CTranslate2 Whisper directory; returns {"variables", "tokenizer", "parts"}."""
    spec = spec or TinyWhisper()
    directory.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer()
    tok.save(str(directory / "tokenizer.json"))
    vocab_size = tok.get_vocab_size() + TIMESTAMPS
    variables = whisper_variables(spec, vocab_size, seed)
    paths = write_model_bin(directory, model_bin_bytes("WhisperSpec", variables, ALIASES), parts)
    eot = tok.token_to_id("<|endoftext|>")
    config = {
        "alignment_heads": [[1, 0], [1, 1]],
        "lang_ids": [tok.token_to_id("<|en|>"), tok.token_to_id("<|de|>")],
        "suppress_ids": [1, 2, 3],
        "suppress_ids_begin": [220, eot],
    }
    (directory / "config.json").write_text(json.dumps(config))
    return {"variables": variables, "tokenizer": tok, "parts": paths, "spec": spec}


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _layer_norm(x: np.ndarray, v: dict[str, np.ndarray], prefix: str) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * v[f"{prefix}/gamma"] + v[f"{prefix}/beta"]


def _linear(x: np.ndarray, v: dict[str, np.ndarray], prefix: str) -> np.ndarray:
    return x @ v[f"{prefix}/weight"].T + v[f"{prefix}/bias"]


def _attention(q, k, v, n_head: int, causal: bool) -> np.ndarray:
    def heads(x):
        return x.reshape(x.shape[0], n_head, -1).transpose(1, 0, 2)

    q, k, v = heads(q), heads(k), heads(v)
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores + np.triu(np.full(scores.shape[1:], -np.inf), k=1)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    out = (scores / scores.sum(axis=-1, keepdims=True)) @ v
    return out.transpose(1, 0, 2).reshape(q.shape[1], -1)


def _conv1d(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, stride: int) -> np.ndarray:
    """x (frames, in) * weight (out, in, 3), padding 1 -> (frames', out)."""
    padded = np.pad(x, ((1, 1), (0, 0)))
    frames = (padded.shape[0] - 3) // stride + 1
    out = np.stack(
        [sum(padded[t * stride + j] @ weight[:, :, j].T for j in range(3)) for t in range(frames)]
    )
    return out + bias


def encoder_reference(variables: dict[str, np.ndarray], mel: np.ndarray) -> np.ndarray:
    """Whisper's encoder on `mel` (frames, n_mels), from CTranslate2 variables (float64)."""
    v = {k: np.asarray(a, dtype=np.float64) for k, a in variables.items()}
    n_head = int(variables["encoder/num_heads"])
    x = _gelu(_conv1d(mel, v["encoder/conv1/weight"], v["encoder/conv1/bias"], 1))
    x = _gelu(_conv1d(x, v["encoder/conv2/weight"], v["encoder/conv2/bias"], 2))
    x = x + v["encoder/position_encodings/encodings"]
    d = x.shape[1]
    i = 0
    while f"encoder/layer_{i}/ffn/linear_0/weight" in v:
        p = f"encoder/layer_{i}"
        qkv = _linear(
            _layer_norm(x, v, f"{p}/self_attention/layer_norm"), v, f"{p}/self_attention/linear_0"
        )
        attn = _attention(qkv[:, :d], qkv[:, d : 2 * d], qkv[:, 2 * d :], n_head, False)
        x = x + _linear(attn, v, f"{p}/self_attention/linear_1")
        h = _gelu(_linear(_layer_norm(x, v, f"{p}/ffn/layer_norm"), v, f"{p}/ffn/linear_0"))
        x = x + _linear(h, v, f"{p}/ffn/linear_1")
        i += 1
    return _layer_norm(x, v, "encoder/layer_norm")


def decoder_reference(
    variables: dict[str, np.ndarray], tokens: list[int], audio: np.ndarray
) -> np.ndarray:
    """Whisper's decoder logits (tokens, vocab) given encoder output `audio` (float64)."""
    v = {k: np.asarray(a, dtype=np.float64) for k, a in variables.items()}
    n_head = int(variables["decoder/num_heads"])
    embed = v["decoder/embeddings/weight"]
    x = embed[tokens] + v["decoder/position_encodings/encodings"][: len(tokens)]
    d = x.shape[1]
    i = 0
    while f"decoder/layer_{i}/ffn/linear_0/weight" in v:
        p = f"decoder/layer_{i}"
        qkv = _linear(
            _layer_norm(x, v, f"{p}/self_attention/layer_norm"), v, f"{p}/self_attention/linear_0"
        )
        attn = _attention(qkv[:, :d], qkv[:, d : 2 * d], qkv[:, 2 * d :], n_head, True)
        x = x + _linear(attn, v, f"{p}/self_attention/linear_1")
        q = _linear(_layer_norm(x, v, f"{p}/attention/layer_norm"), v, f"{p}/attention/linear_0")
        kv = _linear(audio, v, f"{p}/attention/linear_1")
        x = x + _linear(
            _attention(q, kv[:, :d], kv[:, d:], n_head, False), v, f"{p}/attention/linear_2"
        )
        h = _gelu(_linear(_layer_norm(x, v, f"{p}/ffn/layer_norm"), v, f"{p}/ffn/linear_0"))
        x = x + _linear(h, v, f"{p}/ffn/linear_1")
        i += 1
    return _layer_norm(x, v, "decoder/layer_norm") @ embed.T
