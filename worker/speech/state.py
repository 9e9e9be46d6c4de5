"""Per-request state that mlx-audio keeps in globals, swapped in and out around each step.

The speech engine advances several requests' `model.generate(...)` generators in turn on one
thread. Two kinds of state would otherwise leak between them:
- the random stream: mlx-audio samples with `mx.random` without a key, i.e. from the global
  `mx.random.state`, so each request carries its own key (from its seed) and it is swapped in
  for its step. A request seeded with S therefore draws exactly what
  `mx.random.seed(S); model.generate(...)` draws on its own, however requests interleave;
- streaming buffers some families keep on their modules (Qwen3-TTS's codec decoder keeps its
  convolution tails, overlap-add remainders and transformer cache as `_buffer`, `_overflow`
  and `_transformer_cache`): a request's values are saved after its step and restored before
  the next one. A new request starts from the reset state (all None).
"""

from __future__ import annotations

import os
from typing import Any

import mlx.core as mx

STATE_ATTRS = ("_buffer", "_overflow", "_transformer_cache")


def seed_key(seed: int | None) -> int:
    """The 64-bit seed to install; a random one when seed is None."""
    if seed is None:
        return int.from_bytes(os.urandom(8), "little")
    return seed % (1 << 64)


def current_key() -> int:
    """The global PRNG key as the seed that reinstalls it: mx.random.seed(s) sets the key
    [s >> 32, s & 0xffffffff] (mx.random.state can be read but not assigned)."""
    high, low = (int(v) for v in mx.random.state[0].tolist())
    return (high << 32) | low


class ModuleState:
    """The streaming attributes of a model's modules: found once, then saved and restored."""

    def __init__(self, model: Any) -> None:
        self._slots: list[tuple[Any, str]] = []
        seen: set[int] = set()
        for _, module in model.named_modules():
            owner = _unwrap(module)
            if id(owner) in seen:
                continue
            seen.add(id(owner))
            self._slots.extend((owner, a) for a in STATE_ATTRS if a in _own_attrs(owner))

    def __len__(self) -> int:
        return len(self._slots)

    def fresh(self) -> list[Any]:
        """The reset state: what a new stream starts from."""
        return [None] * len(self._slots)

    def save(self) -> list[Any]:
        return [getattr(owner, attr) for owner, attr in self._slots]

    def load(self, values: list[Any]) -> None:
        for (owner, attr), value in zip(self._slots, values, strict=True):
            setattr(owner, attr, value)


def _unwrap(module: Any) -> Any:
    # mlx-audio wraps some modules in mx.compile, whose wrapper forwards attribute reads;
    # the state must be set on the module itself, which its bound methods know.
    method = getattr(module, "named_modules", None)
    return getattr(method, "__self__", module)


def _own_attrs(module: Any) -> set[str]:
    names = set(getattr(module, "__dict__", {}))
    if isinstance(module, dict):
        names |= set(module.keys())
    return names


class RequestState:
    """One request's random key and module state, swapped in for its step by `active()`."""

    def __init__(self, modules: ModuleState, seed: int | None) -> None:
        self._modules = modules
        self._key = seed_key(seed)
        self._values = modules.fresh()

    def __enter__(self) -> RequestState:
        mx.random.seed(self._key)
        self._modules.load(self._values)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._key = current_key()
        self._values = self._modules.save()
