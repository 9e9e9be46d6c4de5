"""The tiny random-weight Whisper checkpoint: real layout, real loader, reproducible."""

from __future__ import annotations

import json

import pytest

from worker.tiny_models import ensure_checkpoint
from worker.tiny_models import whisper as tiny_whisper


@pytest.fixture(scope="module")
def path():
    return ensure_checkpoint("whisper")


def test_it_has_the_files_a_hugging_face_whisper_checkpoint_ships(path):
    names = {p.name for p in path.iterdir()}
    assert {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "preprocessor_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.json",
        "merges.txt",
    } <= names
    assert json.loads((path / "config.json").read_text())["model_type"] == "whisper"


def test_mlx_audio_loads_it_as_a_multilingual_whisper(path):
    stt = pytest.importorskip("mlx_audio.stt")
    model = stt.load(str(path))
    assert type(model).__module__ == "mlx_audio.stt.models.whisper.whisper"
    assert model.is_multilingual and model.num_languages == 99
    tokenizer = model.get_tokenizer(language="de", task="translate")
    assert tokenizer.sot_sequence == (50258, 50261, 50358)  # as openai/whisper-* number them
    assert tokenizer.timestamp_begin == 50364 and tokenizer.eot == 50257


def test_builds_are_byte_identical(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    tiny_whisper.build(None, tiny_whisper.SIZES["tiny"], first)
    tiny_whisper.build(None, tiny_whisper.SIZES["tiny"], second)
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
