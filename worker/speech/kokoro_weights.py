"""Kokoro's weight-normed convolutions with their weights normalized once, not on every call.

mlx-audio's `ConvWeighted` (mlx_audio/tts/models/kokoro/istftnet.py) stores a convolution's
weight as a direction and a magnitude (w = g * v / ||v||) and recomputes w each time it is
called: for the 89 such convolutions of Kokoro-82M (58M weights), ~0.2 s of every utterance
on a 2-core CPU, whatever its length, so a short phrase's first audio waits for it. The weights
never change while serving, so `install()` gives the class a `__call__` that computes w with
mlx-audio's own `weight_norm` the first time and keeps it on the module (a private attribute,
outside the parameter tree, so nothing saved or loaded changes): the same operations on the
same inputs, so the same bits (tests/unit/test_speech_kokoro_weights.py). Kept against the very
arrays it came from: a module whose `weight_v` or `weight_g` is replaced (`load_weights`,
`set_dtype`) computes it again at its next call (the replaced arrays stay alive until then).
The price: a copy of those weights in their dtype (~230 MB for Kokoro-82M in float32). The
first call evaluates the weight, so it is not for a call traced by `mx.compile` (mlx-audio's
`model(..., decoder=...)`; the worker never makes one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx

# mlx-audio's own ConvWeighted.__call__, kept by `install()` (the tests compare the two).
STOCK_CALL: Any = None


@dataclass(frozen=True, eq=False)
class _Normed:
    """A module's normalized weight and the two arrays it was computed from."""

    direction: mx.array
    magnitude: mx.array
    weight: mx.array


def _normalized(conv: Any) -> mx.array:
    """g * v / ||v|| by mlx-audio's `weight_norm`, as its ConvWeighted computes it."""
    from mlx_audio.tts.models.kokoro.istftnet import weight_norm

    return weight_norm(conv.weight_v, conv.weight_g, dim=0)


def normed_weight(conv: Any) -> mx.array:
    """`conv`'s normalized weight, computed once per pair of arrays."""
    kept = getattr(conv, "_normed", None)
    if kept is None or kept.direction is not conv.weight_v or kept.magnitude is not conv.weight_g:
        weight = _normalized(conv)
        mx.eval(weight)
        kept = _Normed(conv.weight_v, conv.weight_g, weight)
        conv._normed = kept
    return kept.weight


def weight_of(conv: Any) -> mx.array:
    """`conv`'s weight as its call computes it: kept once installed, else normalized now (as
    mlx-audio does on every call)."""
    return normed_weight(conv) if STOCK_CALL is not None else _normalized(conv)


def conv_weighted(self: Any, x: mx.array, conv: Any) -> mx.array:
    """mlx-audio's ConvWeighted.__call__ with the weight normalized once: the same convolution
    (channels-first weight when `x`'s channels match it or the convolution is grouped, else
    the weight transposed), plus the bias."""
    weight = normed_weight(self)
    if not (x.shape[-1] == weight.shape[-1] or self.groups > 1):
        weight = weight.T
    out = conv(x, weight, stride=self.stride, padding=self.padding, dilation=self.dilation,
               groups=self.groups)  # fmt: skip
    return out if self.bias is None else out + self.bias.reshape(1, 1, -1)


def install() -> None:
    """Give every ConvWeighted the normalized-once weight (idempotent, on any device)."""
    from mlx_audio.tts.models.kokoro.istftnet import ConvWeighted

    global STOCK_CALL
    if STOCK_CALL is None:
        STOCK_CALL = ConvWeighted.__call__
        ConvWeighted.__call__ = conv_weighted


def uninstall() -> None:
    """Give ConvWeighted mlx-audio's own `__call__` back (for reference runs)."""
    from mlx_audio.tts.models.kokoro.istftnet import ConvWeighted

    global STOCK_CALL
    if STOCK_CALL is not None:
        ConvWeighted.__call__ = STOCK_CALL
        STOCK_CALL = None
