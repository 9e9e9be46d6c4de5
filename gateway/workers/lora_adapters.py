"""LoRA adapters as the gateway checks them before a worker loads one: the name a request's
`model` will use, and a directory in mlx-lm's adapter layout (the worker reads the weights and
checks them against the model: worker/text/adapters/files.py)."""

from __future__ import annotations

import os
import re

# What an adapter may be called: it becomes a model id in URLs and in `model` fields.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}")


def adapter_problem(name: str, path: str) -> tuple[str, str] | None:
    """(the field at fault, `lora_name` or `lora_path`, and why) when `name` = `path` cannot
    be loaded, else None."""
    if not NAME.fullmatch(name):
        return "lora_name", (
            f"{name[:200]!r} is not an adapter name: 1 to 128 letters, digits and . _ : / @ + -, "
            "starting with a letter or digit"
        )
    if not os.path.isfile(os.path.join(path, "adapter_config.json")):
        return "lora_path", not_an_adapter(path)
    return None


def not_an_adapter(path: str) -> str:
    return f"{path[:500]!r} is not an mlx-lm LoRA adapter directory (no adapter_config.json)"
