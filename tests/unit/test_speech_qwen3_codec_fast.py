"""Qwen3-TTS's codec decoder in faster CPU forms (worker/speech/qwen3_codec_fast.py): each
swapped layer computes what the stock one does, the decoder's streamed audio stays the stock
audio to float rounding, only the decoder it is given changes, and uninstalling gives the stock
classes (and bit-identical audio) back."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx_audio.tts.models.qwen3_tts import speech_tokenizer as st
from mlx_audio.tts.utils import load_model

from worker.speech import qwen3_codec_fast
from worker.speech.staged import unwrap_decoder
from worker.tiny_models import ensure_checkpoint


def close(got: mx.array, want: mx.array, tol: float = 1e-5) -> None:
    assert got.shape == want.shape
    scale = max(1.0, float(mx.abs(want).max()))
    assert float(mx.abs(got - want).max()) <= tol * scale


def stock_and_fast(make, fast: type) -> tuple[nn.Module, nn.Module]:
    """Two modules from `make()` with the same parameters, the second of class `fast`."""
    stock, twin = make(), make()
    twin.update(stock.parameters())
    twin.__class__ = fast
    return stock, twin


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kernel_size": 7, "dilation": 9},
        {"kernel_size": 7, "dilation": 1, "bias": False},
        {"kernel_size": 1},
        {"kernel_size": 4, "stride": 2},
        {"kernel_size": 7, "groups": 8},
    ],
)
def test_a_fast_conv1d_equals_the_stock_one(kwargs):
    mx.random.seed(0)
    stock, fast = stock_and_fast(lambda: nn.Conv1d(16, 24, **kwargs), qwen3_codec_fast.FastConv1d)
    x = mx.random.normal((2, 80, 16))
    close(fast(x), stock(x))


@pytest.mark.parametrize("rate", [2, 3, 5, 8])
def test_a_fast_transposed_conv_equals_the_stock_one(rate):
    mx.random.seed(1)
    make = lambda: nn.ConvTranspose1d(24, 12, 2 * rate, stride=rate)  # noqa: E731
    stock, fast = stock_and_fast(make, qwen3_codec_fast.FastConvTranspose1d)
    x = mx.random.normal((1, 9, 24))
    close(fast(x), stock(x))


@pytest.mark.parametrize("snake", [st.SnakeBeta, st.DecoderOutputSnake])
def test_a_fast_snake_equals_the_stock_one(snake):
    mx.random.seed(2)
    stock, fast = stock_and_fast(lambda: snake(32), qwen3_codec_fast._fast_classes()[snake])
    params = {"alpha": mx.random.normal((32,)) * 0.5, "beta": mx.random.normal((32,)) * 0.5}
    stock.update(params)
    fast.update(params)
    x = mx.random.normal((1, 40, 32)) * 3
    close(fast(x), stock(x), 1e-5)


def streamed(decoder, frames: int = 4) -> mx.array:
    decoder.reset_streaming_state()
    chunks = [
        decoder.streaming_step(mx.full((1, 16, 1), 7 * f + 3, mx.int32)) for f in range(frames)
    ]
    audio = mx.concatenate(chunks, axis=-1)
    mx.eval(audio)
    decoder.reset_streaming_state()
    return audio


def test_the_decoders_audio_stays_the_stock_audio_and_only_that_decoder_changes():
    model = load_model(ensure_checkpoint("qwen3_tts_base"))
    decoder = unwrap_decoder(model.speech_tokenizer.decoder)
    stock = streamed(decoder)
    assert qwen3_codec_fast.install(decoder) and qwen3_codec_fast.install(decoder)
    swapped = [type(m) for _, m in decoder.named_modules() if type(m).__name__.startswith("Fast")]
    assert len(swapped) > 20
    assert {c.__name__ for c in swapped} >= {"FastConv1d", "FastConvTranspose1d", "FastSnakeBeta"}
    # The codec's encoder (voice cloning), the talker and any other module: stock.
    others = (model.speech_tokenizer.encoder_model, model.talker, nn.Conv1d(4, 4, 3))
    assert not any(
        type(m).__name__.startswith("Fast") for o in others for _, m in o.named_modules()
    )
    fast = streamed(decoder)
    assert fast.shape == stock.shape
    assert float(mx.abs(fast - stock).max()) < 4e-4  # as docs/speech.md says
    assert np.corrcoef(np.asarray(fast).ravel(), np.asarray(stock).ravel())[0, 1] > 0.99999
    qwen3_codec_fast.uninstall(decoder)
    assert not any(type(m).__name__.startswith("Fast") for _, m in decoder.named_modules())
    assert mx.array_equal(streamed(decoder), stock)


def test_nothing_is_installed_off_the_cpu(monkeypatch):
    model = load_model(ensure_checkpoint("qwen3_tts"))
    decoder = unwrap_decoder(model.speech_tokenizer.decoder)
    monkeypatch.setattr(qwen3_codec_fast.mx, "default_device", lambda: mx.gpu)
    assert not qwen3_codec_fast.install(decoder)
    assert not any(type(m).__name__.startswith("Fast") for _, m in decoder.named_modules())


def test_a_long_signal_is_convolved_tap_by_tap_to_the_same_result(monkeypatch):
    mx.random.seed(3)
    stock, fast = stock_and_fast(
        lambda: nn.Conv1d(16, 24, kernel_size=7, dilation=3), qwen3_codec_fast.FastConv1d
    )
    x = mx.random.normal((1, 300, 16))
    monkeypatch.setattr(qwen3_codec_fast, "IM2COL_MAX_BYTES", 0)  # every signal is "long"
    close(fast(x), stock(x))
