"""An mlx-lm LoRA adapter directory, read and checked before any layer is touched.

mlx-lm's layout: `adapter_config.json` (`fine_tune_type`, `num_layers`, `lora_parameters` with
`rank` and `scale`) and `adapters.safetensors`, whose keys name the adapted linear layers
(`model.layers.3.self_attn.q_proj.lora_a` and `.lora_b`). `mlx_lm.load(path,
adapter_path=...)` applies it as `y = linear(x) + scale * (x @ lora_a) @ lora_b`; served here
the same way, beside the base model's other requests. Only LoRA on linear layers: a DoRA or
full fine-tune adapter changes the base weights themselves and cannot share them, so it is
refused by name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx

CONFIG, WEIGHTS = "adapter_config.json", "adapters.safetensors"


class AdapterError(ValueError):
    """An adapter that cannot be served on this model; the message says why."""


@dataclass(frozen=True)
class AdapterFiles:
    path: str
    scale: float
    layers: dict[str, tuple[mx.array, mx.array]]  # module path -> (lora_a, lora_b)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes + b.nbytes for a, b in self.layers.values())


def read_adapter(path: str) -> AdapterFiles:
    """The adapter at `path`; AdapterError naming the problem when it is not one we serve."""
    directory = Path(path)
    if not (directory / CONFIG).is_file():
        raise AdapterError(f"{path!r} is not a LoRA adapter directory (no {CONFIG})")
    if not (directory / WEIGHTS).is_file():
        raise AdapterError(f"the adapter {path!r} has no {WEIGHTS}")
    config = _config(directory / CONFIG)
    kind = config.get("fine_tune_type", "lora")
    if kind != "lora":
        raise AdapterError(
            f"the adapter {path!r} is a {kind!r} fine-tune; only LoRA adapters can be served "
            "beside their base model"
        )
    parameters = config.get("lora_parameters")
    scale = parameters.get("scale") if isinstance(parameters, dict) else None
    if not isinstance(scale, (int, float)) or isinstance(scale, bool):
        raise AdapterError(f"the adapter {path!r} has no numeric lora_parameters.scale")
    try:
        weights = mx.load(str(directory / WEIGHTS))
    except Exception as exc:
        raise AdapterError(f"the adapter {path!r}'s {WEIGHTS} cannot be read: {exc}") from None
    assert isinstance(weights, dict)  # a .safetensors file loads as a dict
    return AdapterFiles(str(directory), float(scale), _pairs(path, weights))


def _config(file: Path) -> dict[str, Any]:
    try:
        config = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise AdapterError(f"{file} cannot be read as JSON: {exc}") from None
    if not isinstance(config, dict):
        raise AdapterError(f"{file} is not a JSON object")
    return config


def _pairs(path: str, weights: dict[str, mx.array]) -> dict[str, tuple[mx.array, mx.array]]:
    """Module path -> (lora_a, lora_b), each pair complete and of matching rank."""
    halves: dict[str, dict[str, mx.array]] = {}
    for key, value in weights.items():
        module, _, leaf = key.rpartition(".")
        if leaf not in ("lora_a", "lora_b") or not module:
            raise AdapterError(
                f"the adapter {path!r} holds {key!r}, which is not a LoRA weight (lora_a, lora_b)"
            )
        halves.setdefault(module, {})[leaf] = value
    if not halves:
        raise AdapterError(f"the adapter {path!r} holds no weights")
    layers = {}
    for module, pair in halves.items():
        a, b = pair.get("lora_a"), pair.get("lora_b")
        if a is None or b is None:
            raise AdapterError(f"the adapter {path!r} has only half of {module!r}'s LoRA weights")
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
            raise AdapterError(
                f"the adapter {path!r}'s {module!r} weights have shapes {a.shape} and "
                f"{b.shape}, not (in, rank) and (rank, out)"
            )
        layers[module] = (a, b)
    return layers
