"""A GGUF file's metadata, and its tensors under Hugging Face names, dequantized to float32.

The `gguf` package reads the file (memory-mapped) and dequantizes every block format it knows
(`gguf.quants.dequantize`): F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (covered by the tests)
and the K-quants (Q2_K ... Q6_K) and IQ formats (the same dequantizer, not covered here).

llama.cpp's converter permutes the rows of `attn_q` and `attn_k` of llama-family models: its
RoPE rotates adjacent pairs of a head's dimensions (x0, x1), (x2, x3), ..., while Hugging Face's
rotates the two halves (x_i, x_{i+d/2}). It reorders each head's rows from [first half; second
half] to interleaved pairs; `unpermute_rows` puts them back, so that mlx-lm's (half-rotation)
RoPE sees the original projection. Architectures whose llama.cpp RoPE is the NeoX (halves)
kind, such as qwen2, are stored unpermuted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from worker.convert.errors import ConversionError
from worker.convert.output import PlannedTensor

# GGUF tensor names -> Hugging Face (Llama / Qwen2 layout) names.
GLOBAL_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}
LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


@dataclass(frozen=True)
class GgufTensor:
    """One tensor of the file: its GGUF name and type, its numpy shape (rows first)."""

    name: str
    type_name: str
    shape: tuple[int, ...]
    data: np.ndarray  # the raw (memory-mapped) data: floats, or the blocks' bytes
    type_id: Any  # gguf.GGMLQuantizationType


class GgufFile:
    """A GGUF file opened for conversion: `metadata` (key -> value) and `tensors` by name."""

    def __init__(self, path: str | Path) -> None:
        import gguf

        try:
            reader = gguf.GGUFReader(str(path), "r")
        except (ValueError, OSError, KeyError) as exc:
            raise ConversionError(f"{path}: not a readable GGUF file ({exc})") from exc
        self.path = Path(path)
        self.metadata: dict[str, Any] = {
            name: field.contents()
            for name, field in reader.fields.items()
            if not name.startswith("GGUF.")
        }
        self.tensors: dict[str, GgufTensor] = {}
        for tensor in reader.tensors:
            shape = tuple(int(d) for d in reversed(tensor.shape.tolist()))
            self.tensors[tensor.name] = GgufTensor(
                tensor.name, tensor.tensor_type.name, shape, tensor.data, tensor.tensor_type
            )

    def require(self, key: str) -> Any:
        """The metadata value of `key`, or a ConversionError naming it."""
        if key not in self.metadata:
            raise ConversionError(f"{self.path.name}: metadata {key!r} is missing")
        return self.metadata[key]


def dequantize(tensor: GgufTensor) -> np.ndarray:
    """The tensor's values as float32, in its numpy shape."""
    import gguf

    try:
        values = gguf.quants.dequantize(tensor.data, tensor.type_id)
    except NotImplementedError as exc:
        raise ConversionError(
            f"{tensor.name}: tensor type {tensor.type_name} cannot be dequantized"
        ) from exc
    return np.asarray(values, dtype=np.float32).reshape(tensor.shape)


def unpermute_rows(weight: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's q/k permutation: each head's rows from interleaved pairs back to
    [first half; second half]. `weight` is a projection (rows = heads x head_dim) or a bias."""
    rows = weight.shape[0]
    if rows % (2 * n_head):
        raise ConversionError(f"{rows} rows do not split into {n_head} heads of pairs")
    half = rows // n_head // 2
    return weight.reshape(n_head, half, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def hf_name(name: str) -> tuple[str, str]:
    """(Hugging Face name, GGUF base name) of a GGUF tensor name: "blk.3.attn_q.weight" ->
    ("model.layers.3.self_attn.q_proj.weight", "attn_q")."""
    parts = name.split(".")
    if parts[0] == "blk" and len(parts) == 4 and parts[1].isdigit() and parts[2] in LAYER_NAMES:
        return f"model.layers.{parts[1]}.{LAYER_NAMES[parts[2]]}.{parts[3]}", parts[2]
    if len(parts) == 2 and parts[0] in GLOBAL_NAMES:
        return f"{GLOBAL_NAMES[parts[0]]}.{parts[1]}", parts[0]
    if parts[0] == "rope_freqs":
        raise ConversionError(
            "rope_freqs (Llama 3.1-style RoPE frequency scaling) is not supported yet"
        )
    raise ConversionError(f"tensor {name!r} has no Hugging Face counterpart here")


def planned_tensors(
    source: GgufFile, n_head: int, n_head_kv: int, permuted_qk: bool
) -> list[PlannedTensor]:
    """Every tensor of `source` under its Hugging Face name, dequantized (and, where llama.cpp
    permuted them, with the q/k rows restored) only when produced."""
    planned = []
    for tensor in source.tensors.values():
        name, base = hf_name(tensor.name)
        heads = {"attn_q": n_head, "attn_k": n_head_kv}.get(base) if permuted_qk else None
        planned.append(PlannedTensor(name, tensor.shape, _producer(tensor, heads)))
    return planned


def _producer(tensor: GgufTensor, heads: int | None) -> Callable[[], np.ndarray]:
    def produce() -> np.ndarray:
        values = dequantize(tensor)
        return unpermute_rows(values, heads) if heads else values

    return produce


def type_counts(source: GgufFile) -> dict[str, int]:
    """How many tensors of each GGUF type the file holds (for the conversion summary)."""
    counts: dict[str, int] = {}
    for tensor in source.tensors.values():
        counts[tensor.type_name] = counts.get(tensor.type_name, 0) + 1
    return dict(sorted(counts.items()))
