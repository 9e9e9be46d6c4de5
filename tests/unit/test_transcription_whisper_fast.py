"""Whisper's encoder attention on two CPU streams (worker/transcription/whisper_fast.py) gives
the stock encoder's output bit for bit, on a random-weight Whisper with tiny.en's encoder
shape (6 heads; the tiny checkpoint has 1, which is left as it is), and leaves the decoder's
attention alone. (The engine's transcripts against stock mlx-audio:
test_transcription_float32.py; on the real tiny.en: tests/weights/test_real_speech_in.py.)"""

from __future__ import annotations

import pytest

from worker.tiny_models import ensure_checkpoint

pytest.importorskip("mlx_audio.stt")

import mlx.core as mx  # noqa: E402
from mlx_audio.stt import load  # noqa: E402

from worker.transcription import whisper_fast  # noqa: E402

pytestmark = pytest.mark.skipif(mx.default_device() != mx.cpu, reason="installed on the CPU only")

# Whisper tiny.en's encoder (4 layers of 384 wide, 6 heads) over a shorter window, a small
# decoder: what is compared is the encoder.
DIMS = {"n_mels": 80, "n_audio_ctx": 300, "n_audio_state": 384, "n_audio_head": 6,
        "n_audio_layer": 4, "n_vocab": 64, "n_text_ctx": 8, "n_text_state": 64,
        "n_text_head": 2, "n_text_layer": 1}  # fmt: skip


@pytest.fixture(scope="module")
def models():
    from mlx.utils import tree_flatten
    from mlx_audio.stt.models.whisper.whisper import Model, ModelDimensions

    stock = Model(ModelDimensions(**DIMS), mx.float32)
    fast = Model(ModelDimensions(**DIMS), mx.float32)
    fast.load_weights(tree_flatten(stock.parameters()))
    mx.eval(stock.parameters(), fast.parameters())
    assert whisper_fast.install(fast)
    return stock, fast


def test_an_encoder_of_one_head_is_left_as_it_is():
    assert not whisper_fast.install(load(str(ensure_checkpoint("whisper"))))


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16])
def test_the_encoder_is_the_stock_one_bit_for_bit(models, dtype):
    stock, fast = models
    mel = mx.random.normal((2, 2 * DIMS["n_audio_ctx"], DIMS["n_mels"]), key=mx.random.key(3))
    stock.set_dtype(dtype)
    fast.set_dtype(dtype)
    try:
        want, got = stock.encoder(mel.astype(dtype)), fast.encoder(mel.astype(dtype))
        assert mx.array_equal(want, got).item()
    finally:
        stock.set_dtype(mx.float32)
        fast.set_dtype(mx.float32)


def test_the_attention_with_a_mask_returns_the_stock_output_and_scores(models):
    stock, fast = models
    x = mx.random.normal((1, 40, DIMS["n_audio_state"]), key=mx.random.key(5))
    mask = mx.triu(mx.full((40, 40), -mx.inf), k=1)
    want, got = (
        stock.encoder.blocks[0].attn(x, mask=mask),
        fast.encoder.blocks[0].attn(x, mask=mask),
    )
    assert mx.array_equal(want[0], got[0]).item()  # the output
    assert mx.array_equal(want[2], got[2]).item()  # the scores


def test_only_the_encoder_attention_is_replaced(models):
    _, fast = models
    for block in fast.encoder.blocks:
        assert "qkv_attention" in vars(block.attn)
    for block in fast.decoder.blocks:
        assert "qkv_attention" not in vars(block.attn)
        assert "qkv_attention" not in vars(block.cross_attn)
