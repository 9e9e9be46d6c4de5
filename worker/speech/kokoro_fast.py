"""Kokoro on a CPU at the speed of its matrix products: faster forms of the three operations
mlx-audio's Kokoro spends its time in, used by its decoder without forking it.

On the CPU, MLX computes a dilated `conv1d` and every `conv_transpose1d` in direct loops that
do not use BLAS, and `sin` element by element: each one to two orders of magnitude slower than
the same work as a matrix product or a vectorized polynomial (docs/benchmarks.md, "Kokoro-82M").
Kokoro's decoder (mlx_audio/tts/models/kokoro/istftnet.py) calls all three through its
module's `mx`; `install()` gives that module a view of `mlx.core` in which they are:

- `conv1d`: the kernel's taps gathered side by side (im2col) and one matrix product, which
  runs on BLAS (OpenBLAS, which the worker preloads);
- `conv_transpose1d`: one matrix product per input frame's contribution, then the overlapping
  frames added where they land (overlap-add), the way the transposed convolution is defined;
- `sin`: an exact range reduction to [-pi, pi] and an odd polynomial (max error ~1e-7).
Each is the stock operation's math (tests/unit/test_speech_kokoro_fast.py compares them), and
grouped convolutions go to the stock ones. Only where MLX runs on the CPU: on a GPU the stock
kernels are the fast ones.
"""

from __future__ import annotations

import math
import types
from typing import Any

import mlx.core as mx

# sin(x) on [-pi, pi] as an odd polynomial of degree 15, fitted by least squares (max error
# 2.1e-10 on a float64 grid; in float32, rounding dominates: ~1e-7).
_SIN = (
    0.9999999997084912,
    -0.16666666638220481,
    0.008333333004939766,
    -0.00019841248423195328,
    2.755656144667316e-06,
    -2.5036899384978717e-08,
    1.588500068365795e-10,
    -6.580663375770719e-13,
)


# 2 pi in two parts (Cody and Waite): the first with few enough bits that `turns * part`
# is exact in float32 for up to 2^16 turns, so the reduction stays exact for large phases
# (the sine generator's phase reaches thousands of turns).
_TWO_PI_HIGH = 6.28125
_TWO_PI_LOW = 2 * math.pi - _TWO_PI_HIGH


def sin(x: mx.array) -> mx.array:
    """sin(x) from element-wise products and sums (fast on the CPU)."""
    turns = mx.round(x * (1 / (2 * math.pi)))
    y = (x - turns * _TWO_PI_HIGH) - turns * _TWO_PI_LOW
    square = y * y
    total = mx.array(_SIN[-1], dtype=x.dtype)
    for coefficient in reversed(_SIN[:-1]):
        total = total * square + coefficient
    return total * y


def conv1d(
    x: mx.array,
    weight: mx.array,
    stride: int = 1,
    padding: int = 0,
    dilation: int = 1,
    groups: int = 1,
) -> mx.array:
    """mx.conv1d (x: (N, L, C_in), weight: (C_out, K, C_in)) as im2col and one product."""
    if groups != 1 or x.ndim != 3:
        return mx.conv1d(x, weight, stride=stride, padding=padding, dilation=dilation,
                         groups=groups)  # fmt: skip
    out_channels, kernel, in_channels = weight.shape
    if kernel == 1 and stride == 1 and padding == 0:
        return x @ weight.reshape(out_channels, in_channels).T
    if padding:
        x = mx.pad(x, [(0, 0), (padding, padding), (0, 0)])
    length = (x.shape[1] - dilation * (kernel - 1) - 1) // stride + 1
    span = (length - 1) * stride + 1
    taps = [x[:, k * dilation : k * dilation + span : stride] for k in range(kernel)]
    columns = mx.concatenate(taps, axis=-1)  # (N, L_out, K * C_in), tap-major like weight
    return columns @ weight.reshape(out_channels, kernel * in_channels).T


def conv_transpose1d(
    x: mx.array,
    weight: mx.array,
    stride: int = 1,
    padding: int = 0,
    dilation: int = 1,
    groups: int = 1,
    output_padding: int = 0,
) -> mx.array:
    """mx.conv_transpose1d (weight: (C_out, K, C_in)) as a product and an overlap-add."""
    if groups != 1 or dilation != 1 or x.ndim != 3:
        return mx.conv_transpose1d(x, weight, stride=stride, padding=padding,
                                   dilation=dilation, groups=groups,
                                   output_padding=output_padding)  # fmt: skip
    batch, length, _ = x.shape
    out_channels, kernel, in_channels = weight.shape
    # frame l's contribution to output positions l * stride + k, for every tap k
    frames = x @ weight.reshape(out_channels * kernel, in_channels).T  # (N, L, C_out * K)
    frames = frames.reshape(batch, length, out_channels, kernel).transpose(0, 1, 3, 2)
    pieces = -(-kernel // stride)  # the kernel in stride-long pieces (the last one padded)
    if pieces * stride != kernel:
        frames = mx.pad(frames, [(0, 0), (0, 0), (0, pieces * stride - kernel), (0, 0)])
    full = (length + pieces - 1) * stride
    total = None
    for j in range(pieces):
        piece = frames[:, :, j * stride : (j + 1) * stride].reshape(batch, length * stride, -1)
        placed = mx.pad(piece, [(0, 0), (j * stride, full - (length + j) * stride), (0, 0)])
        total = placed if total is None else total + placed
    assert total is not None
    size = (length - 1) * stride + kernel + output_padding
    if size > full:
        total = mx.pad(total, [(0, 0), (0, size - full), (0, 0)])
    return total[:, padding : size - padding]


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
    from mlx_audio.tts.models.kokoro.istftnet import weight_norm

    weight = weight_norm(conv.weight_v, conv.weight_g, dim=0)  # (C_out, K, C_in)
    padding, dilation = conv.padding, conv.dilation
    batch, length, _ = x.shape
    if padding:
        x = mx.pad(x, [(0, 0), (padding, padding), (0, 0)])
    out = mx.broadcast_to(conv.bias, (batch, length, weight.shape[0]))
    for k in range(weight.shape[1]):
        out = mx.addmm(out, x[:, k * dilation : k * dilation + length], weight[:, k].T)
    return out


def adain_resblock(self: Any, x: mx.array, s: mx.array) -> mx.array:
    """mlx-audio's AdaINResBlock1.__call__ (x: (N, C, L)), computed channels last with the
    fused AdaIN + Snake and per-tap convolutions: the same math."""
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
