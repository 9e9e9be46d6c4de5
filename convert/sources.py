"""Which converter a source needs, by what it is; `convert_source` runs it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from convert.errors import ConversionError
from convert.output import Summary

GGUF_MAGIC = b"GGUF"


def source_kind(src: Path) -> str:
    """ "gguf" for a GGUF file, "ct2-whisper" for a CTranslate2 model (a directory with
    model.bin or model.bin.part1, or such a file); ConversionError for anything else."""
    if src.is_file():
        with src.open("rb") as f:
            if f.read(4) == GGUF_MAGIC:
                return "gguf"
        if src.name == "model.bin" or src.name.startswith("model.bin.part"):
            return "ct2-whisper"
        raise ConversionError(f"{src}: neither a GGUF file nor a CTranslate2 model.bin")
    if src.is_dir():
        if (src / "model.bin").is_file() or (src / "model.bin.part1").is_file():
            return "ct2-whisper"
        raise ConversionError(f"{src}: a directory without model.bin (CTranslate2)")
    raise ConversionError(f"{src}: no such file or directory")


def convert_source(
    src: Path, out: Path, dtype: str | None = None, extra_parts: Sequence[Path] = ()
) -> Summary:
    """Convert `src` into the (existing, empty) directory `out` with the converter it needs."""
    kind = source_kind(src)
    if kind == "gguf":
        if extra_parts:
            raise ConversionError("--part is for a split CTranslate2 model.bin, not GGUF")
        from convert.from_gguf import convert_gguf

        return convert_gguf(src, out, dtype)
    from convert.from_ct2 import convert_ct2_whisper

    return convert_ct2_whisper(src, out, dtype, extra_parts)
