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


class Routing:
    """The adapter slot of each row of the model call being built (0: the base model)."""

    def __init__(self) -> None:
        self.uniform: int | None = 0  # the one slot of every row, None when they differ
        self.masks: dict[int, mx.array] = {}  # slot -> (rows, 1, 1) bool, when they differ

    def set(self, slots: list[int]) -> None:
        if len(set(slots)) <= 1:
            self.uniform, self.masks = (slots[0] if slots else 0), {}
            return
        rows = mx.array(slots)[:, None, None]
        self.uniform = None
        self.masks = {slot: rows == slot for slot in set(slots) if slot}

    def reset(self) -> None:
        self.uniform, self.masks = 0, {}


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
        for slot, mask in routing.masks.items():
            found = adapters.get(slot)
            if found is not None:
                a, b, scale = found
                z = (x @ a) @ b
                y = y + mx.where(mask, (scale * z).astype(x.dtype), 0)
        return y


class _Slots:
    """A plain holder, so that mlx's Module does not take the adapters for parameters."""

    def __init__(self) -> None:
        self.by_slot: dict[int, tuple[mx.array, mx.array, float]] = {}


def dimensions(linear: Any) -> tuple[int, int] | None:
    """(input, output) features of a linear layer an adapter may adapt, else None."""
    if isinstance(linear, AdaptedLinear):
        linear = linear.linear
    if isinstance(linear, nn.QuantizedLinear):
        out, packed = linear.weight.shape
        return packed * 32 // linear.bits, out
    if isinstance(linear, nn.Linear):
        out, inputs = linear.weight.shape
        return inputs, out
    return None
