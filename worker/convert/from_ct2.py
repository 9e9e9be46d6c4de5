"""CTranslate2 Whisper directory -> the Hugging Face Whisper layout mlx-audio loads.

The source is what faster-whisper style packages ship: model.bin (or model.bin.part1,
model.bin.part2, ... to be concatenated), config.json (suppressed tokens, alignment heads) and
tokenizer.json. The output: config.json, generation_config.json, preprocessor_config.json,
model.safetensors (transformers' tensor names) and the tokenizer files, timestamps added.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from worker.convert import whisper_layout, whisper_tokenizer
from worker.convert.ct2_format import read_model_bin
from worker.convert.errors import ConversionError
from worker.convert.output import Summary, write_json, write_safetensors

PART = re.compile(r"^model\.bin\.part(\d+)$")


def model_bin_parts(src: Path, extra_parts: Sequence[Path] = ()) -> list[Path]:
    """The files whose concatenation is the model.bin: `src` itself when it is a file, else
    model.bin in the directory, else its model.bin.part1, part2, ... in order; then
    `extra_parts` (pieces kept elsewhere, e.g. in another package)."""
    if src.is_file():
        return [src, *extra_parts]
    if (src / "model.bin").is_file():
        if extra_parts:
            raise ConversionError(f"{src} has a whole model.bin: no parts to add")
        return [src / "model.bin"]
    numbered = sorted(
        (int(m.group(1)), path) for path in src.iterdir() if (m := PART.match(path.name))
    )
    parts = [path for _, path in numbered] + list(extra_parts)
    if not parts:
        raise ConversionError(f"{src} has no model.bin (nor model.bin.part1, ...)")
    return parts


def convert_ct2_whisper(
    src: Path, out: Path, dtype: str | None = None, extra_parts: Sequence[Path] = ()
) -> Summary:
    """Convert the CTranslate2 Whisper model in `src` (a directory, or its model.bin / first
    part) into the (existing, empty) directory `out`. `dtype` defaults to the source's float
    type (float16 stays float16; int8 weights become float32)."""
    parts = model_bin_parts(src, extra_parts)
    directory = src if src.is_dir() else src.parent
    model = read_model_bin(parts)
    shape = whisper_layout.dims(model)
    tensors = whisper_layout.planned_tensors(model, shape)
    dtype = dtype or _source_dtype(model.variables["decoder/embeddings/weight"].dtype.name)

    tokenizer_path = directory / "tokenizer.json"
    if not tokenizer_path.is_file():
        raise ConversionError(f"{directory} has no tokenizer.json")
    tok = whisper_tokenizer.load_tokenizer(tokenizer_path, shape.vocab_size)
    ids = whisper_tokenizer.special_ids(tok, shape.vocab_size)
    ct2_config = _read_config(directory / "config.json")

    metadata = {"format": "pt", "converted_from": "ctranslate2"}
    n_params = write_safetensors(out / "model.safetensors", tensors, dtype, metadata)
    write_json(out / "config.json", whisper_layout.model_config(shape, ids, ct2_config, dtype))
    write_json(
        out / "generation_config.json",
        whisper_layout.generation_config(shape, ids, ct2_config),
    )
    write_json(out / "preprocessor_config.json", whisper_layout.preprocessor_config(shape.n_mels))
    tok.save(str(out / "tokenizer.json"))
    for name, data in whisper_tokenizer.tokenizer_files(tok).items():
        write_json(out / name, data)
    (out / "merges.txt").write_text(whisper_tokenizer.merges_text(tok), encoding="utf-8")

    details = [
        f"WhisperSpec revision {model.revision} (binary version {model.binary_version}) "
        f"from {len(parts)} file(s): {shape.encoder_layers} + {shape.decoder_layers} layers, "
        f"d_model {shape.d_model}, {shape.n_mels} mel bins, vocabulary {shape.vocab_size}",
        f"tokenizer: timestamps <|0.00|> ... <|30.00|> at ids {ids.no_timestamps + 1}"
        f"-{ids.no_timestamps + whisper_tokenizer.TIMESTAMPS}, "
        + ("multilingual" if ids.languages else "English-only"),
    ]
    return Summary("ct2-whisper", out, n_params, dtype, details)


def _source_dtype(name: str) -> str:
    return name if name in ("float16", "float32") else "float32"


def _read_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}  # suppressed tokens and alignment heads then take Whisper's defaults
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConversionError(f"{path}: unreadable ({exc})") from exc
    if not isinstance(data, dict):
        raise ConversionError(f"{path}: not a JSON object")
    return data
