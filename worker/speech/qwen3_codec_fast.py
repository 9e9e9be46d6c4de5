"""Qwen3-TTS's codec decoder on a CPU at the speed of its matrix products.

On the CPU the codec's decoder is most of Qwen3-TTS's time: at the real size (1536 wide, 24
kHz) one 80 ms codec frame took 2.98 s to decode against 0.53 s for the talker and the code
predictor that made it (docs/benchmarks.md), nearly all of it in dilated convolutions,
transposed convolutions and Snake activations' `sin`, which MLX runs there in direct loops.
`install(decoder)` gives one model's decoder worker/speech/cpu_ops.py's faster forms of them,
without forking mlx-audio and without touching any other model: each `nn.Conv1d` and
`nn.ConvTranspose1d` in it, and each Snake activation, becomes an instance of a subclass whose
`__call__` computes the same math that way (the decoder's own code, mlx-audio's streaming
buffers and the worker's staged replay, worker/speech/staged.py, are unchanged). Grouped
convolutions keep the stock kernel. 19x faster per frame at the real size; the audio is the
stock decoder's to float rounding (within 4e-4 of full scale on random weights; tests/unit/
test_speech_qwen3_codec_fast.py). Only where MLX runs on the CPU: on a GPU the stock kernels
are the fast ones, and nothing is installed.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from worker.speech.cpu_ops import conv1d, conv_transpose1d, sin, taps_conv1d

# Above this, a convolution's im2col copy of its input (the taps side by side) is not made:
# one product per tap instead. Streamed decoding (a frame or a few at a time) stays below it,
# where im2col is the faster (0.16 against 0.25 s a frame at the real size); a whole clip
# decoded at once (300 frames) would need ~1.5 GB for the last block's copies.
IM2COL_MAX_BYTES = 64 << 20


class FastConv1d(nn.Conv1d):
    def __call__(self, x: mx.array) -> mx.array:
        copy = x.nbytes * self.weight.shape[1]
        if copy > IM2COL_MAX_BYTES and self.stride == 1 and self.groups == 1:
            bias = self.bias if "bias" in self else None
            return taps_conv1d(x, self.weight, bias, self.padding, self.dilation)
        y = conv1d(x, self.weight, self.stride, self.padding, self.dilation, self.groups)
        return y + self.bias if "bias" in self else y


class FastConvTranspose1d(nn.ConvTranspose1d):
    def __call__(self, x: mx.array) -> mx.array:
        y = conv_transpose1d(
            x,
            self.weight,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
            groups=getattr(self, "groups", 1),  # (MLX's layer has none yet)
            output_padding=self.output_padding,
        )
        return y + self.bias if "bias" in self else y


def _snake(self: Any, x: mx.array) -> mx.array:
    # SnakeBeta: x + sin(x * alpha)^2 / beta (alpha, beta stored as logs); a product for the
    # square (`mx.power` is a pow call per element on the CPU).
    s = sin(x * mx.exp(self.alpha))
    return x + (1.0 / (mx.exp(self.beta) + self.eps)) * (s * s)


@cache
def _fast_classes() -> dict[type, type]:
    """Stock class -> its fast subclass (the Snake ones made here, on mlx-audio's classes)."""
    from mlx_audio.tts.models.qwen3_tts import speech_tokenizer as st

    classes: dict[type, type] = {nn.Conv1d: FastConv1d, nn.ConvTranspose1d: FastConvTranspose1d}
    for snake in (st.SnakeBeta, st.DecoderOutputSnake):
        classes[snake] = type(f"Fast{snake.__name__}", (snake,), {"__call__": _snake})
    return classes


def install(decoder: Any) -> bool:
    """Give `decoder` (a Qwen3-TTS speech tokenizer's decoder, the module itself) the fast
    forms, where MLX runs on the CPU; whether they are installed (idempotent)."""
    if mx.default_device() != mx.cpu:
        return False
    classes = _fast_classes()
    for _, module in decoder.named_modules():
        fast = classes.get(type(module))
        if fast is not None:
            module.__class__ = fast
    return True


def uninstall(decoder: Any) -> None:
    """The stock classes back (reference runs: tests, benchmarks)."""
    stock = {fast: base for base, fast in _fast_classes().items()}
    for _, module in decoder.named_modules():
        base = stock.get(type(module))
        if base is not None:
            module.__class__ = base
