"""How to build one architecture: its tokenizer, configs, sizes and the function that writes it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from worker.tiny_models.tokenizer import TokenizerSpec

# The sizes of one family (text.Dims for text decoders, whisper.WhisperDims, ...).
D = TypeVar("D")


@dataclass(frozen=True)
class Arch(Generic[D]):
    """How to build one architecture (text decoders use `text.build_text_decoder`). `config`
    and `generation_config` take the family's sizes and token ids, as the family needs."""

    tokenizer: TokenizerSpec
    config: Callable[..., dict[str, Any]]
    generation_config: Callable[..., dict[str, Any]]
    sizes: Mapping[str, D]
    # Writes every file into a given directory and returns the number of parameters.
    build: Callable[[Any, D, Path], int]
