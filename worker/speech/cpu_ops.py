"""Faster forms, on the CPU, of three MLX operations that the speech decoders spend their time in.

On the CPU, MLX computes a dilated `conv1d` and every `conv_transpose1d` in direct loops that
do not use BLAS, and `sin` element by element: each one to two orders of magnitude slower than
the same work as a matrix product or a vectorized polynomial (docs/benchmarks.md). Here:

- `conv1d`: the kernel's taps gathered side by side (im2col) and one matrix product, which
  runs on BLAS (OpenBLAS, which the worker preloads);
- `conv_transpose1d`: one matrix product per input frame's contribution, then the overlapping
  frames added where they land (overlap-add), the way the transposed convolution is defined;
- `sin`: an exact range reduction to [-pi, pi] and an odd polynomial (max error ~1e-7);
- `taps_conv1d`: a stride-1 `conv1d` as one product per tap, added into the output (no im2col
  copy: for long signals).
Each is the stock operation's math, to float rounding (tests/unit/test_speech_kokoro_fast.py
compares them); grouped convolutions go to the stock ones. Kokoro's decoder
(worker/speech/kokoro_fast.py) and Qwen3-TTS's codec (worker/speech/qwen3_codec_fast.py) use
them where MLX runs on the CPU; on a GPU the stock kernels are the fast ones.
"""

from __future__ import annotations

import math

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


def taps_conv1d(
    x: mx.array, weight: mx.array, bias: mx.array | None, padding: int = 0, dilation: int = 1
) -> mx.array:
    """A stride-1, ungrouped `conv1d` (x: (N, L, C_in), weight: (C_out, K, C_in)) plus `bias`,
    as one product per tap added into the output: no K-times copy of the signal (im2col's), so
    a long signal costs no more memory than its output."""
    batch = x.shape[0]
    if padding:
        x = mx.pad(x, [(0, 0), (padding, padding), (0, 0)])
    out_channels, kernel, _ = weight.shape
    length = x.shape[1] - dilation * (kernel - 1)
    out = mx.zeros((batch, length, out_channels), x.dtype) if bias is None else bias
    out = mx.broadcast_to(out, (batch, length, out_channels))
    for k in range(kernel):
        out = mx.addmm(out, x[:, k * dilation : k * dilation + length], weight[:, k].T)
    return out
