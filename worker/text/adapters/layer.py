"""A linear layer plus, for each row of the call, that row's own LoRA adapter.

`y = linear(x) + scale * (x @ lora_a) @ lora_b` for a row whose adapter adapts this layer, and
`y = linear(x)` for the others; which row uses which adapter is the `Routing` the registry sets
around each model call. When every row uses the same adapter, the sum is the very expression
mlx-lm's `LoRALinear` computes (the same operations in the same order), so a request through an
adapter equals `mlx_lm.load(..., adapter_path=...)` token for token; rows of several adapters
add each adapter's term where its rows are, and exactly nothing elsewhere.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.tuner.lora import LoRALinear


class Routing:
    """The adapter slot of each row of the model call being built (0: the base model)."""

    def __init__(self) -> None:
        self.uniform: int | None = 0  # the one slot of every row, None when they differ
        self.rows = 0
        self._slots: mx.array | None = None  # (rows,) when they differ
        self.adapted: set[int] = set()  # the adapter slots of the rows, when they differ
        self._masks: dict[tuple[int, int], mx.array] = {}  # (slot, ndim): one per call

    def use(self, slots: list[int]) -> None:
        if len(set(slots)) <= 1:
            self.reset()
            self.uniform = slots[0] if slots else 0
            return
        self.uniform, self.rows, self._slots = None, len(slots), mx.array(slots)
        self.adapted, self._masks = set(slots) - {0}, {}

    def reset(self) -> None:
        self.uniform, self._slots, self.adapted, self._masks = 0, None, set(), {}

    def mask(self, slot: int, x: mx.array) -> mx.array:
        """Where `slot`'s rows are, broadcastable over `x`'s output: rows lead x's shape
        (a layer that flattens its rows first cannot tell them apart: an error)."""
        assert self._slots is not None
        if x.ndim < 2 or x.shape[0] != self.rows:
            raise ValueError(
                f"a layer got input of shape {tuple(x.shape)} for {self.rows} rows of "
                "different adapters: its rows cannot be told apart"
            )
        key = (slot, x.ndim)  # the same for every layer of the call: built once
        if key not in self._masks:
            shape = (self.rows,) + (1,) * (x.ndim - 1)
            self._masks[key] = (self._slots == slot).reshape(shape)
        return self._masks[key]


class AdaptedLinear(nn.Module):
    """`linear` (an nn.Linear or nn.QuantizedLinear) and the adapters loaded for it by slot."""

    def __init__(self, linear: nn.Module, routing: Routing) -> None:
        super().__init__()
        self.linear = linear
        self._routing = routing
        self._adapters = _Slots()  # not a parameter of the model

    def add(self, slot: int, a: mx.array, b: mx.array, scale: float) -> None:
        self._adapters.by_slot[slot] = (a, b, scale)

    def drop(self, slot: int) -> None:
        self._adapters.by_slot.pop(slot, None)

    def __call__(self, x: mx.array) -> mx.array:
        y = self.linear(x)
        adapters = self._adapters.by_slot
        if not adapters:
            return y
        routing = self._routing
        if routing.uniform is not None:
            found = adapters.get(routing.uniform)
            if found is None:
                return y
            a, b, scale = found
            z = (x @ a) @ b
            return y + (scale * z).astype(x.dtype)
        for slot in routing.adapted:
            found = adapters.get(slot)
            if found is not None:
                a, b, scale = found
                z = (x @ a) @ b
                y = y + mx.where(routing.mask(slot, x), (scale * z).astype(x.dtype), 0)
        return y

    def __getattr__(self, key: str) -> Any:
        """The wrapped layer's data (`weight`, `bits`, ...), which model code may read; not
        its methods (`to_quantized`, `fuse`: a rewrite must not take the wrapper for it)."""
        try:
            return super().__getattr__(key)
        except AttributeError:
            if key not in _FORWARDED or "linear" not in self:
                raise
            return getattr(self["linear"], key)


_FORWARDED = frozenset({"weight", "bias", "scales", "biases", "bits", "group_size", "mode"})


class _Slots:
    """A plain holder, so that mlx's Module does not take the adapters for parameters."""

    def __init__(self) -> None:
        self.by_slot: dict[int, tuple[mx.array, mx.array, float]] = {}


def dimensions(linear: Any) -> tuple[int, int] | None:
    """(input, output) features of a linear layer an adapter may adapt, else None."""
    if isinstance(linear, (AdaptedLinear, LoRALinear)):  # LoRALinear: --adapter-path's
        linear = linear.linear
    if isinstance(linear, nn.QuantizedLinear):
        out, packed = linear.weight.shape
        return packed * 32 // linear.bits, out
    if isinstance(linear, nn.Linear):
        out, inputs = linear.weight.shape
        return inputs, out
    return None
