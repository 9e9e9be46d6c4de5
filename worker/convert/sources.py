"""Which converter a source needs, by what it is; `convert_source` runs it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from worker.convert.errors import ConversionError
from worker.convert.output import Summary

GGUF_MAGIC = b"GGUF"


def source_kind(src: Path) -> str:
    """ "gguf" for a GGUF file, "ct2-whisper" for a CTranslate2 model (a directory with
    model.bin or model.bin.part1, or such a file), "kokoro-onnx" for an ONNX file (Kokoro's
    export); ConversionError for anything else."""
    if src.is_file():
        with src.open("rb") as f:
            if f.read(4) == GGUF_MAGIC:
                return "gguf"
        if src.name == "model.bin" or src.name.startswith("model.bin.part"):
            return "ct2-whisper"
        if src.suffix == ".onnx":
            return "kokoro-onnx"
        raise ConversionError(
            f"{src}: not a GGUF file, a CTranslate2 model.bin or a Kokoro ONNX export (.onnx)"
        )
    if src.is_dir():
        if (src / "model.bin").is_file() or (src / "model.bin.part1").is_file():
            return "ct2-whisper"
        raise ConversionError(f"{src}: a directory without model.bin (CTranslate2)")
    raise ConversionError(f"{src}: no such file or directory")


def convert_source(
    src: Path,
    out: Path,
    dtype: str | None = None,
    extra_parts: Sequence[Path] = (),
    vocab: Path | None = None,
    voices: Path | None = None,
) -> Summary:
    """Convert `src` into the (existing, empty) directory `out` with the converter it needs
    (`vocab` and `voices`: a Kokoro export's phoneme vocabulary and voice packs)."""
    kind = source_kind(src)
    if (vocab or voices) and kind != "kokoro-onnx":
        raise ConversionError("--vocab and --voices are for a Kokoro ONNX export")
    if kind == "kokoro-onnx":
        if extra_parts:
            raise ConversionError("--part is for a split CTranslate2 model.bin, not ONNX")
        if dtype not in (None, "float32"):
            raise ConversionError("a Kokoro checkpoint is written in float32 only")
        if vocab is None or voices is None:
            raise ConversionError(
                "a Kokoro ONNX export needs --vocab (its vocab.json) and --voices (an .npz of "
                "voice packs, each [510, 1, 256])"
            )
        from worker.convert.from_kokoro_onnx import convert_kokoro_onnx

        return convert_kokoro_onnx(src, vocab, voices, out)
    if kind == "gguf":
        if extra_parts:
            raise ConversionError("--part is for a split CTranslate2 model.bin, not GGUF")
        from worker.convert.from_gguf import convert_gguf

        return convert_gguf(src, out, dtype)
    from worker.convert.from_ct2 import convert_ct2_whisper

    return convert_ct2_whisper(src, out, dtype, extra_parts)
