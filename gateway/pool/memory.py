"""What a pool's models take in memory: the estimate a model is loaded against, its worker's
resident size."""

from __future__ import annotations

from pathlib import Path

from gateway.config import ServerConfig

WEIGHT_SUFFIXES = (".safetensors", ".npz", ".gguf", ".bin", ".pt", ".pth")


def estimate_bytes(path: str, config: ServerConfig, kind: str) -> int:
    """Weights on disk plus what the model's caches may hold (the prefix cache budget of a
    model that may chat)."""
    weights = 0
    root = Path(path)
    if root.is_dir():
        for file in root.rglob("*"):
            if file.suffix in WEIGHT_SUFFIXES and file.is_file():
                weights += file.stat().st_size
    caches = config.prefix_cache_bytes if kind in ("chat", "auto") else 0
    return weights + caches


def resident_bytes(pid: int) -> int | None:
    """A process's resident set size (Linux /proc; None elsewhere or when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def gib(size: int) -> str:
    return f"{size / 2**30:.2f} GiB"
