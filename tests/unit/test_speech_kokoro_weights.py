"""Kokoro's weight-normed convolutions with the weight normalized once
(worker/speech/kokoro_weights.py) give mlx-audio's own results bit for bit, and notice a
replaced weight."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import pytest

from worker.speech import kokoro_weights


@pytest.fixture
def patched():
    """ConvWeighted with the install, and mlx-audio's own call; the install as it was after."""
    from mlx_audio.tts.models.kokoro.istftnet import ConvWeighted

    was_installed = kokoro_weights.STOCK_CALL is not None
    kokoro_weights.install()
    stock = kokoro_weights.STOCK_CALL
    assert stock is not None and ConvWeighted.__call__ is kokoro_weights.conv_weighted
    yield ConvWeighted, stock
    if not was_installed:
        kokoro_weights.uninstall()


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
def test_the_normalized_once_call_is_the_stock_one_bit_for_bit(patched, kwargs, x_shape,
                                                               op):  # fmt: skip
    cls, stock = patched
    conv = randomized(cls(**kwargs), seed=len(x_shape) + x_shape[1])
    x = mx.random.normal(x_shape, key=mx.random.key(40))
    operation = getattr(mx, op)
    first, again = conv(x, operation), conv(x, operation)  # the second from the kept weight
    expected = stock(conv, x, operation)
    assert first.shape == expected.shape
    assert mx.array_equal(first, expected).item() and mx.array_equal(again, expected).item()


def test_a_replaced_weight_is_normalized_again_and_nothing_joins_the_parameters(patched):
    cls, stock = patched
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
    replaced = kokoro_weights.normed_weight(conv)
    assert replaced is not kept

    conv.load_weights([("weight_g", mx.full((5, 1, 1), 0.5))], strict=False)  # the magnitude
    assert mx.array_equal(conv(x, mx.conv1d), stock(conv, x, mx.conv1d)).item()
    assert kokoro_weights.normed_weight(conv) is not replaced


def test_uninstalled_the_weight_is_normalized_on_every_call(patched):
    cls, _ = patched
    conv = randomized(cls(4, 4, 3, padding=1), seed=5)
    kept = kokoro_weights.weight_of(conv)
    assert kokoro_weights.weight_of(conv) is kept
    kokoro_weights.uninstall()
    try:
        fresh = kokoro_weights.weight_of(conv)
        assert fresh is not kept and kokoro_weights.weight_of(conv) is not fresh
        assert mx.array_equal(fresh, kept).item()
    finally:
        kokoro_weights.install()


def test_the_kokoro_engine_installs_both_forms(monkeypatch):
    pytest.importorskip("misaki.espeak", reason="Kokoro's G2P needs misaki and espeak-ng")
    from mlx_audio.tts.models.kokoro.istftnet import ConvWeighted

    from worker.speech import kokoro_fast
    from worker.speech.engine import load_tts_engine
    from worker.tiny_models import ensure_checkpoint

    spread = []
    monkeypatch.setattr(kokoro_fast, "to_side_stream", spread.append)
    engine = load_tts_engine(str(ensure_checkpoint("kokoro")))
    assert ConvWeighted.__call__ is kokoro_weights.conv_weighted
    on_cpu = mx.default_device() == mx.cpu
    assert spread == ([engine.model.decoder.generator] if on_cpu else [])
