"""Reader of CTranslate2's model.bin: the spec name, then named variables with dtype and shape.

The layout (little-endian), as CTranslate2's own loader reads it, binary versions 2 to 6:

    u32 binary_version
    str spec_name, u32 spec_revision                         (version >= 2)
    u32 n_variables, then for each:
        str name, u8 rank, u32 dims[rank],
        u8 dtype_id, u32 n_bytes                             (version >= 4; DTYPES below)
        or u8 item_size, u32 n_items                         (older: 4 float32, 2 int16, 1 int8)
        bytes data
    u32 n_aliases, then pairs of str alias, str target       (version >= 3)

where `str` is a u16 length (the trailing NUL included), then the bytes and the NUL. Scalars
(rank 0) hold flags and counts ("encoder/num_heads"). int8 / int16 weights come with a
"<name>_scale" variable (per row, or one value): value = quantized / scale.

A model.bin may be split into parts (packages that cap a file's size): they are read as one
stream, in order.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from worker.convert.errors import ConversionError

# CTranslate2's DataType enum, in order; bfloat16 is read as its uint16 bit patterns.
DTYPES: dict[int, np.dtype] = {
    0: np.dtype("<f4"),
    1: np.dtype("i1"),
    2: np.dtype("<i2"),
    3: np.dtype("<i4"),
    4: np.dtype("<f2"),
    5: np.dtype("<u2"),
}
BFLOAT16_ID = 5
LEGACY_ITEM_SIZES = {4: np.dtype("<f4"), 2: np.dtype("<i2"), 1: np.dtype("i1")}
SUPPORTED_VERSIONS = range(2, 7)


@dataclass
class Ct2Model:
    """What a model.bin holds. Variables are numpy arrays (bfloat16 already widened)."""

    binary_version: int
    spec: str
    revision: int
    variables: dict[str, np.ndarray]
    aliases: dict[str, str]

    def get(self, name: str) -> np.ndarray | None:
        """The variable `name`, following an alias."""
        return self.variables.get(self.aliases.get(name, name))

    def scalar(self, name: str) -> int | None:
        value = self.get(name)
        return None if value is None else int(value.reshape(()))

    def weight(self, name: str) -> np.ndarray:
        """A float weight: int8 / int16 ones dequantized with their scale; KeyError if absent."""
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        if value.dtype.kind in "iu" and name.endswith("weight"):
            scale = self.get(f"{name}_scale")
            if scale is None:
                raise ConversionError(f"{name} is {value.dtype} without a {name}_scale")
            scale = scale.astype(np.float32)
            if scale.ndim == 1:
                scale = scale.reshape(-1, *([1] * (value.ndim - 1)))
            return value.astype(np.float32) / scale
        return value


class _Stream:
    """Reads the concatenation of several files as one stream."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = list(paths)
        self.index = 0
        self.file: BinaryIO | None = None
        self.offset = 0

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.file is not None:
            self.file.close()

    def _read_some(self, n: int) -> bytes:
        """Up to `n` bytes: fewer only at the end of the last file."""
        chunks, wanted = [], n
        while wanted:
            if self.file is None:
                if self.index == len(self.paths):
                    break
                self.file = self.paths[self.index].open("rb")
                self.index += 1
            chunk = self.file.read(wanted)
            if not chunk:
                self.file.close()
                self.file = None
                continue
            chunks.append(chunk)
            wanted -= len(chunk)
        return b"".join(chunks)

    def read(self, n: int) -> bytes:
        data = self._read_some(n)
        if len(data) != n:
            raise ConversionError(f"model.bin ends early: {n} bytes wanted at offset {self.offset}")
        self.offset += n
        return data

    def at_end(self) -> bool:
        return self._read_some(1) == b""

    def unpack(self, fmt: str) -> int:
        return struct.unpack("<" + fmt, self.read(struct.calcsize("<" + fmt)))[0]

    def string(self) -> str:
        raw = self.read(self.unpack("H"))
        return raw.split(b"\0", 1)[0].decode("utf-8")


def read_model_bin(paths: Path | Sequence[Path]) -> Ct2Model:
    """Read a model.bin (or its parts, in order)."""
    parts = [paths] if isinstance(paths, Path) else list(paths)
    if not parts:
        raise ConversionError("no model.bin given")
    with _Stream(parts) as stream:
        version = stream.unpack("I")
        if version not in SUPPORTED_VERSIONS:
            raise ConversionError(
                f"model.bin binary version {version} is not supported "
                f"({SUPPORTED_VERSIONS.start}-{SUPPORTED_VERSIONS.stop - 1})"
            )
        spec = stream.string()
        revision = stream.unpack("I")
        variables: dict[str, np.ndarray] = {}
        for _ in range(stream.unpack("I")):
            name = stream.string()
            shape = tuple(stream.unpack("I") for _ in range(stream.unpack("B")))
            if version >= 4:
                type_id = stream.unpack("B")
                if type_id not in DTYPES:
                    raise ConversionError(f"{name}: unknown CTranslate2 dtype id {type_id}")
                dtype, n_bytes = DTYPES[type_id], stream.unpack("I")
            else:
                type_id, item_size = -1, stream.unpack("B")
                if item_size not in LEGACY_ITEM_SIZES:
                    raise ConversionError(f"{name}: unknown item size {item_size}")
                dtype, n_bytes = LEGACY_ITEM_SIZES[item_size], stream.unpack("I") * item_size
            expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            if n_bytes != expected:
                raise ConversionError(f"{name}: {n_bytes} bytes for shape {shape} of {dtype}")
            value = np.frombuffer(stream.read(n_bytes), dtype=dtype).reshape(shape)
            if type_id == BFLOAT16_ID:
                value = (value.astype(np.uint32) << 16).view(np.float32)
            variables[name] = value
        aliases: dict[str, str] = {}
        if version >= 3:
            for _ in range(stream.unpack("I")):
                alias = stream.string()
                aliases[alias] = stream.string()
        if not stream.at_end():
            raise ConversionError(f"model.bin has bytes past its end (offset {stream.offset})")
    return Ct2Model(version, spec, revision, variables, aliases)
