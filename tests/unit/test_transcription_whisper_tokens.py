"""Whisper's no-speech token id looked up once per tokenizer
(worker/transcription/whisper_tokens.py) is mlx-audio's own lookup's answer, and the
vocabulary is read once, not on every access."""

from __future__ import annotations

import pytest

from worker.tiny_models import ensure_checkpoint

pytest.importorskip("mlx_audio.stt")

from mlx_audio.stt import load  # noqa: E402

from worker.transcription import whisper_tokens  # noqa: E402


@pytest.fixture(autouse=True)
def as_it_was():
    """The install as it was before each test."""
    was_installed = whisper_tokens.STOCK_NO_SPEECH is not None
    yield
    if not was_installed:
        whisper_tokens.uninstall()


def test_the_id_is_mlx_audio_s_own_and_the_vocabulary_is_read_once(monkeypatch):
    whisper_tokens.install()
    stock = whisper_tokens.STOCK_NO_SPEECH
    model = load(str(ensure_checkpoint("whisper")))
    first = model.get_tokenizer(language="en", task="transcribe")
    expected = stock.fget(first)
    assert expected is not None  # the tiny checkpoint's vocabulary has <|nocaptions|>

    hf = first.hf_tokenizer
    reads = []
    vocab = hf.get_vocab
    monkeypatch.setattr(hf, "get_vocab", lambda: reads.append(1) or vocab())
    whisper_tokens._ids.pop(hf, None)
    again = model.get_tokenizer(language="en", task="transcribe")  # a new wrapper, same tokenizer
    assert [first.no_speech, again.no_speech, first.no_speech] == [expected] * 3
    assert len(reads) == 1


def test_uninstall_gives_the_stock_property_back():
    from mlx_audio.stt.models.whisper.whisper import HFTokenizerWrapper

    whisper_tokens.install()
    stock = whisper_tokens.STOCK_NO_SPEECH
    whisper_tokens.uninstall()
    assert HFTokenizerWrapper.no_speech is stock


def test_the_whisper_engine_installs_it():
    from mlx_audio.stt.models.whisper.whisper import HFTokenizerWrapper

    from worker.transcription.engine import load_stt_engine

    whisper_tokens.uninstall()
    load_stt_engine(str(ensure_checkpoint("whisper")))
    assert HFTokenizerWrapper.no_speech.fget is whisper_tokens._no_speech
