"""Kokoro on a CPU at the speed of its matrix products: faster forms of the three operations
mlx-audio's Kokoro spends its time in, used by its decoder without forking it.

On the CPU, MLX computes a dilated `conv1d` and every `conv_transpose1d` in direct loops that
do not use BLAS, and `sin` element by element (docs/benchmarks.md, "Kokoro-82M"). Kokoro's
decoder (mlx_audio/tts/models/kokoro/istftnet.py) calls all three through its module's `mx`;
`install()` gives that module a view of `mlx.core` in which they are worker/speech/cpu_ops.py's
faster forms, and computes its residual blocks channels last with a fused AdaIN + Snake;
`to_side_stream` puts one of each generator stage's residual blocks on the second CPU stream.
Only where MLX runs on the CPU: on a GPU the stock kernels are the fast ones.
"""

from __future__ import annotations

import types
from typing import Any

import mlx.core as mx

from worker.runtime.side_stream import side_stream
from worker.speech.cpu_ops import conv1d, conv_transpose1d, sin, taps_conv1d
from worker.speech.kokoro_weights import weight_of


def _adain_snake(x: mx.array, gamma: mx.array, beta: mx.array, alpha: mx.array) -> mx.array:
    """Instance norm over time, the style's scale and shift, then Snake (x + sin(a x)^2 / a),
    channels last: x (N, L, C), the others (N or 1, 1, C). The norm and the style fold into
    one scale and shift per channel (C values, not L * C), so the signal is read by one fused
    pass that multiplies and adds."""
    mean = mx.mean(x, axis=1, keepdims=True)
    var = mx.var(x, axis=1, keepdims=True)
    scale = (1 + gamma) / mx.sqrt(var + 1e-5)
    return _scaled_snake(x, scale, beta - mean * scale, alpha, 1 / alpha)


def _scaled_snake_pass(
    x: mx.array, scale: mx.array, shift: mx.array, alpha: mx.array, inverse: mx.array
) -> mx.array:
    y = x * scale + shift
    s = sin(alpha * y)
    return y + inverse * (s * s)  # a product: `** 2` is a pow call per element on the CPU


# One fused kernel for the pass over the signal (a dozen element-wise passes uncompiled);
# shapeless: every utterance has its own length, and recompiling per length would cost more.
_scaled_snake = mx.compile(_scaled_snake_pass, shapeless=True)


def _style(adain: Any, s: mx.array) -> tuple[mx.array, mx.array]:
    """AdaIN1d's scale and shift for style `s`, as (N, 1, C) each."""
    h = adain.fc(s)
    gamma, beta = mx.split(h, 2, axis=-1)
    return gamma[:, None, :], beta[:, None, :]


def _taps_conv(x: mx.array, conv: Any) -> mx.array:
    """A weight-normed ConvWeighted (stride 1) on channels-last `x`, as one product per tap
    added into the output: no im2col copy of the signal (K times its size)."""
    weight = weight_of(conv)  # (C_out, K, C_in), normalized as its own call would
    return taps_conv1d(x, weight, conv.bias, conv.padding, conv.dilation)


def adain_resblock(self: Any, x: mx.array, s: mx.array) -> mx.array:
    """mlx-audio's AdaINResBlock1.__call__ (x: (N, C, L)), computed channels last with the
    fused AdaIN + Snake and per-tap convolutions: the same math. A block `to_side_stream`
    marked is built on the side stream."""
    if getattr(self, "on_side_stream", False):
        with mx.stream(side_stream()):
            return _resblock(self, x, s)
    return _resblock(self, x, s)


def _resblock(self: Any, x: mx.array, s: mx.array) -> mx.array:
    x = x.swapaxes(1, 2)
    for c1, c2, n1, n2, a1, a2 in zip(
        self.convs1, self.convs2, self.adain1, self.adain2, self.alpha1, self.alpha2, strict=True
    ):
        gamma, beta = _style(n1, s)
        xt = _adain_snake(x, gamma, beta, a1.reshape(1, 1, -1))
        xt = _taps_conv(xt, c1)
        gamma, beta = _style(n2, s)
        xt = _adain_snake(xt, gamma, beta, a2.reshape(1, 1, -1))
        x = _taps_conv(xt, c2) + x
    return x.swapaxes(1, 2)


def to_side_stream(generator: Any) -> None:
    """Put the last resblock of each of `generator`'s upsampling stages on the side stream
    (worker/runtime/side_stream.py). The generator sums a stage's blocks, each reading the same
    input, so they are independent: the last (the longest kernel, ~40% of the stage) runs on
    the other core while the first two run here, and the sum is made in the same order, so the
    audio is the same bit for bit. Where `install()` put the fast forms in (on the CPU)."""
    kernels = generator.num_kernels
    for index, block in enumerate(generator.resblocks):
        block.on_side_stream = kernels > 1 and index % kernels == kernels - 1


# mlx-audio's own AdaINResBlock1.__call__, kept by `install()` (the tests compare the two).
STOCK_RESBLOCK: Any = None


class _FastCore(types.ModuleType):
    """`mlx.core`, but with the three operations above."""

    def __init__(self) -> None:
        super().__init__("mlx.core")
        self.conv1d = conv1d
        self.conv_transpose1d = conv_transpose1d
        self.sin = sin

    def __getattr__(self, name: str) -> Any:
        return getattr(mx, name)


def install() -> bool:
    """Give Kokoro's decoder module the fast operations, where MLX runs on the CPU; whether
    they were installed (idempotent)."""
    if mx.default_device() != mx.cpu:
        return False
    from mlx_audio.tts.models.kokoro import istftnet

    global STOCK_RESBLOCK
    if not isinstance(istftnet.mx, _FastCore):
        STOCK_RESBLOCK = istftnet.AdaINResBlock1.__call__
        istftnet.mx = _FastCore()
        istftnet.AdaINResBlock1.__call__ = adain_resblock
    return True


def uninstall() -> None:
    """Give Kokoro's decoder module mlx-audio's own operations back (for reference runs)."""
    from mlx_audio.tts.models.kokoro import istftnet

    global STOCK_RESBLOCK
    if isinstance(istftnet.mx, _FastCore):
        istftnet.mx = mx
        istftnet.AdaINResBlock1.__call__ = STOCK_RESBLOCK
        STOCK_RESBLOCK = None
