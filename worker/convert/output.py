"""Writing a converted checkpoint: JSON files, and tensors streamed into a safetensors file.

The safetensors file is written here rather than with the safetensors package so that each
tensor is produced (dequantized, renamed, cast) only when it is written: the header needs just
names, shapes and dtypes, and at most one converted tensor is in memory at a time. The format
is the package's own: a little-endian u64 header length, a JSON header (padded with spaces to
8 bytes) naming each tensor's dtype, shape and byte range, then the tensors' bytes back to back.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from worker.convert.errors import ConversionError

# Output dtypes: the --dtype choices, and safetensors' name for each.
DTYPES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}
ITEM_SIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


@dataclass(frozen=True)
class PlannedTensor:
    """A tensor of the output checkpoint, not computed yet: `produce()` makes it (float)."""

    name: str
    shape: tuple[int, ...]
    produce: Callable[[], np.ndarray]


@dataclass
class Summary:
    """What a conversion did, for the command's report."""

    kind: str  # "gguf", "ct2-whisper" or "kokoro-onnx"
    out: Path
    parameters: int
    dtype: str
    details: list[str] = field(default_factory=list)


def write_json(path: Path, data: Any) -> None:
    """A checkpoint's JSON file: sorted keys, 2-space indent, UTF-8 kept as is."""
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def to_bfloat16_bits(array: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), rounded to nearest even; NaN stays NaN."""
    bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)
    rounded = ((bits + (0x7FFF + ((bits >> 16) & 1))) >> 16).astype(np.uint16)
    return np.where(np.isnan(array), np.uint16(0x7FC0), rounded)


def cast(array: np.ndarray, dtype: str) -> np.ndarray:
    """`array` in the output dtype's in-memory form (bfloat16 as uint16 bit patterns)."""
    if dtype == "bfloat16":
        return to_bfloat16_bits(array)
    return np.ascontiguousarray(array, dtype=dtype)


def write_safetensors(
    path: Path, tensors: Iterable[PlannedTensor], dtype: str, metadata: dict[str, str]
) -> int:
    """Write every planned tensor as `dtype` into `path`; return the number of parameters."""
    if dtype not in DTYPES:
        raise ConversionError(f"unsupported output dtype {dtype!r}: one of {', '.join(DTYPES)}")
    planned = list(tensors)
    header: dict[str, Any] = {"__metadata__": metadata}
    offset = 0
    for tensor in planned:
        size = int(np.prod(tensor.shape, dtype=np.int64)) * ITEM_SIZE[dtype]
        header[tensor.name] = {
            "dtype": DTYPES[dtype],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with path.open("wb") as out:
        out.write(struct.pack("<Q", len(encoded)))
        out.write(encoded)
        for tensor in planned:
            data = cast(tensor.produce(), dtype)
            if data.shape != tensor.shape:
                raise ConversionError(
                    f"{tensor.name}: produced shape {data.shape}, planned {tensor.shape}"
                )
            out.write(data.astype(data.dtype.newbyteorder("<"), copy=False).tobytes())
    return sum(int(np.prod(t.shape, dtype=np.int64)) for t in planned)


def new_staging_directory(target: Path) -> Path:
    """An empty private directory next to `target` to convert into (see `publish`)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))


def publish(staging: Path, target: Path, replace: bool = False) -> bool:
    """Rename the finished `staging` directory to `target`, so that `target` is either absent
    or complete. An existing `target` is replaced when `replace`; otherwise (another process
    published it first) `staging` is discarded and False is returned."""
    staging.chmod(0o755)  # mkdtemp makes it private; a checkpoint is as shared as any file
    for path in staging.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    if replace and target.exists():
        trash = target.with_name(f".{target.name}.{uuid.uuid4().hex}.old")
        os.rename(target, trash)
        shutil.rmtree(trash, ignore_errors=True)
    try:
        os.rename(staging, target)
    except OSError:
        if not target.is_dir():
            raise
        shutil.rmtree(staging, ignore_errors=True)
        return False
    return True
