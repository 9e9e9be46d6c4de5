"""How to build one architecture: its tokenizer, configs, sizes and the function that writes it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.checkpoints.text import Dims, TokenId
from scripts.checkpoints.tokenizer import TokenizerSpec


@dataclass(frozen=True)
class Arch:
    """How to build one architecture (text decoders use `text.build_text_decoder`)."""

    tokenizer: TokenizerSpec
    config: Callable[[Dims, TokenId], dict[str, Any]]
    generation_config: Callable[[TokenId], dict[str, Any]]
    sizes: Mapping[str, Dims]
    # Writes every file into a given directory and returns the number of parameters.
    build: Callable[[Arch, Dims, Path], int]
