"""Kokoro's weight-normed convolutions with the weight normalized once
(worker/speech/kokoro_weights.py) give mlx-audio's own results bit for bit, and notice a
replaced weight."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import pytest

from worker.speech import kokoro_weights


@pytest.fixture
def conv_weighted():
    from mlx_audio.tts.models.kokoro.istftnet import ConvWeighted

    kokoro_weights.install()
    stock = kokoro_weights.STOCK_CALL
    assert stock is not None and ConvWeighted.__call__ is kokoro_weights.conv_weighted
    return ConvWeighted, stock


def randomized(conv, seed: int):
    """`conv` with its direction, magnitude and bias drawn at random (not their all-ones
    initialisation, whose norm would hide a wrong axis)."""
    conv.update(
        {
            name: mx.random.normal(value.shape, key=mx.random.key(seed + i))
            for i, (name, value) in enumerate(sorted(conv.parameters().items()))
        }
    )
    return conv


@pytest.mark.parametrize(
    ("kwargs", "x_shape", "op"),
    [
        ({"in_channels": 12, "out_channels": 20, "kernel_size": 3, "padding": 1}, (2, 9, 12), "conv1d"),
        ({"in_channels": 8, "out_channels": 8, "kernel_size": 7, "padding": 9, "dilation": 3}, (1, 30, 8), "conv1d"),
        ({"in_channels": 6, "out_channels": 6, "kernel_size": 1, "padding": 0, "bias": False}, (1, 5, 6), "conv1d"),
        # the generator's upsampling: the weight transposed on the way in, the bias `encode`'s
        ({"in_channels": 4, "out_channels": 10, "kernel_size": 4, "stride": 2, "padding": 1, "encode": True}, (1, 7, 10), "conv_transpose1d"),
        # grouped (the decoder's pool): the weight as stored
        ({"in_channels": 1, "out_channels": 6, "kernel_size": 3, "stride": 2, "groups": 6, "padding": 0}, (1, 11, 6), "conv_transpose1d"),
    ],
)  # fmt: skip
def test_the_normalized_once_call_is_the_stock_one_bit_for_bit(conv_weighted, kwargs, x_shape,
                                                               op):  # fmt: skip
    cls, stock = conv_weighted
    conv = randomized(cls(**kwargs), seed=len(x_shape) + x_shape[1])
    x = mx.random.normal(x_shape, key=mx.random.key(40))
    operation = getattr(mx, op)
    first, again = conv(x, operation), conv(x, operation)  # the second from the kept weight
    expected = stock(conv, x, operation)
    assert first.shape == expected.shape
    assert mx.array_equal(first, expected).item() and mx.array_equal(again, expected).item()


def test_a_replaced_weight_is_normalized_again_and_nothing_joins_the_parameters(conv_weighted):
    cls, stock = conv_weighted
    conv = randomized(cls(5, 5, 3, padding=1), seed=1)
    x = mx.random.normal((1, 8, 5), key=mx.random.key(2))
    conv(x, mx.conv1d)
    kept = kokoro_weights.normed_weight(conv)
    assert kokoro_weights.normed_weight(conv) is kept  # computed once
    assert set(dict(nn.utils.tree_flatten(conv.parameters()))) == {"weight_g", "weight_v", "bias"}

    conv.load_weights(
        [("weight_v", mx.random.normal((5, 3, 5), key=mx.random.key(3)))], strict=False
    )
    assert mx.array_equal(conv(x, mx.conv1d), stock(conv, x, mx.conv1d)).item()
    assert kokoro_weights.normed_weight(conv) is not kept
