"""A tiny random LoRA adapter for a tiny checkpoint, in mlx-lm's adapter layout, cached.

mlx-lm's layout: `adapter_config.json` (`fine_tune_type`, `num_layers`, `lora_parameters`)
and `adapters.safetensors` holding every `lora_a` / `lora_b`. mlx-lm initializes `lora_b` at
zero (the adapter then changes nothing); here both are random, seeded, so a served adapter
must visibly change the output: tests compare the server with `mlx_lm.load(path,
adapter_path=...)` on the same files.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

LORA = {"rank": 4, "scale": 8.0, "dropout": 0.0}
VERSION = 1


def ensure_lora_adapter(base: str | Path, seed: int = 7) -> Path:
    """The adapter directory for checkpoint `base` (built next to it on first use); another
    `seed` is another adapter of the same shape."""
    base = Path(base)
    tag = "lora" if seed == 7 else f"lora{seed}"
    target = base.parent / f"{base.name}-{tag}-v{VERSION}"
    if (target / "adapters.safetensors").is_file():
        return target
    import mlx.core as mx
    from mlx_lm import load
    from mlx_lm.tuner.utils import linear_to_lora_layers

    model = load(str(base))[0]
    num_layers = len(model.layers)
    model.freeze()
    linear_to_lora_layers(model, num_layers, LORA)
    mx.random.seed(seed)
    weights = {
        name: mx.random.normal(value.shape, dtype=value.dtype) * 0.2
        for name, value in _flat(model.trainable_parameters())
    }
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=base.parent))
    try:
        mx.save_safetensors(str(tmp / "adapters.safetensors"), weights)
        config = {"fine_tune_type": "lora", "num_layers": num_layers, "lora_parameters": LORA}
        (tmp / "adapter_config.json").write_text(json.dumps(config, indent=2))
        try:
            tmp.rename(target)
        except OSError:  # another process built it first
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _flat(tree: Any) -> list[tuple[str, Any]]:
    """mlx's tree_flatten of a parameter tree: (dotted name, array) pairs."""
    from mlx.utils import tree_flatten

    flat = tree_flatten(tree)
    assert isinstance(flat, list)
    return flat
