"""Build a checkpoint once and cache it: `ensure_checkpoint(arch, size)` -> its directory.

Tests and demos cannot download weights, so the builders of this package write checkpoint
directories that the real loaders (`mlx_lm.load`, `mlx_vlm.load`, mlx-audio's) read through
their ordinary path: the real `config.json`, `model.safetensors` with the tensor names real
checkpoints use, a trained tokenizer with its chat template and `generation_config.json`
(`registry.py` lists them; `text.py` holds the decoder recipe the others share).

Usage: `ensure_checkpoint("qwen3")` -> Path, or
`python -m worker.tiny_models --arch llama --size 20m` (prints the path last on stdout).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

from worker.tiny_models.registry import ARCHS, lookup

# Bump when the output of any builder changes, so stale caches are not reused.
BUILDER_VERSION = 3
DEFAULT_CACHE_DIR = Path("~/.cache/vllm-omni-mlx/checkpoints")

log = logging.getLogger(__name__)


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """The checkpoints directory: `cache_dir`, else $VOMLX_CACHE_DIR, else the user cache."""
    chosen = cache_dir or os.environ.get("VOMLX_CACHE_DIR") or DEFAULT_CACHE_DIR
    return Path(chosen).expanduser()


def checkpoint_name(arch: str, size: str) -> str:
    return f"{arch}-{size}-v{BUILDER_VERSION}"


def ensure_checkpoint(
    arch: str = "qwen3",
    size: str = "tiny",
    cache_dir: str | Path | None = None,
    force: bool = False,
) -> Path:
    """Return the directory of the `arch`/`size` checkpoint, building it on first use.

    Safe when several processes ask at once: each builds into its own temporary directory
    next to the target and renames it into place; a loser discards its copy. The target
    therefore either does not exist or is complete.
    """
    spec, dims = lookup(arch, size)
    root = cache_root(cache_dir)
    target = root / checkpoint_name(arch, size)
    if target.is_dir() and not force:
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=root))
    try:
        started = time.perf_counter()
        n_params = spec.build(spec, dims, tmp)
        _make_readable(tmp)
        if force and target.exists():
            _discard(target)
        try:
            os.rename(tmp, target)
        except OSError:
            if not target.is_dir():
                raise
            log.info("%s: built concurrently by another process, keeping theirs", target.name)
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            elapsed = time.perf_counter() - started
            log.info("%s: %.2fM parameters, built in %.2f s", target.name, n_params / 1e6, elapsed)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _make_readable(directory: Path) -> None:
    # mkdtemp (and safetensors) create private files; the cache is as shared as any other.
    directory.chmod(0o755)
    for path in directory.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)


def _discard(path: Path) -> None:
    # Rename first so that no reader sees a half-deleted checkpoint under the real name.
    trash = path.with_name(f".{path.name}.{uuid.uuid4().hex}.old")
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m worker.tiny_models",
        description="Build (once) a tiny random-weight checkpoint and print its directory.",
    )
    parser.add_argument("--arch", default="qwen3", choices=sorted(ARCHS))
    all_sizes = sorted({s for a in ARCHS.values() for s in a.sizes})
    parser.add_argument("--size", default="tiny", choices=all_sizes)
    parser.add_argument("--cache-dir", default=None, help="default: $VOMLX_CACHE_DIR or ~/.cache")
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        path = ensure_checkpoint(args.arch, args.size, args.cache_dir, args.force)
    except ValueError as exc:
        parser.error(str(exc))
    print(path)
    return 0
