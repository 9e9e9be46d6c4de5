"""Attributes stood in for on a model's objects for the length of a `with` block.

The speech engine changes what mlx-audio's code reaches through `self.<name>` without forking
it: the Qwen3-TTS codec's decoder is recorded instead of run (worker/speech/staged.py), the
talker's prefill and a voice's inputs go through the voice cache (worker/speech/voice_cache.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def standing_in(owner: Any, stand_ins: dict[str, Any]) -> Iterator[None]:
    """`owner`'s attributes `stand_ins` while inside. object.__setattr__: an instance
    attribute over the class's method or the Module's child (or dict item), without mlx's
    Module.__setattr__ (which would change the module tree); an instance attribute already
    there (another stand-in) is put back after."""
    before = {name: vars(owner)[name] for name in stand_ins if name in vars(owner)}
    for name, value in stand_ins.items():
        object.__setattr__(owner, name, value)
    try:
        yield
    finally:
        for name in stand_ins:
            if name in before:
                object.__setattr__(owner, name, before[name])
            else:
                object.__delattr__(owner, name)
