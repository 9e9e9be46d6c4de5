"""`--dtype float32` builds a Whisper speech-in model in float32 (mlx-audio always builds it in
float16), on the tiny random-weight Whisper, against mlx-audio's own loader built in float32.

The reference is what `mlx_audio.stt.load` does (config -> `Model(dims, dtype)` -> sanitize ->
load_weights -> post_load_hook) with float32 for the float16 it passes, decoded with
`fp16=False`; the engine must equal it, window boundaries and timestamps included.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from protocol.inputs import TranscribeInputs
from protocol.messages import Submit
from tests.support.stt_audio import SENTENCES, concat_wavs, duration, speech_wav
from worker.tiny_models import ensure_checkpoint

pytest.importorskip("mlx_audio.stt")

import mlx.core as mx  # noqa: E402
from mlx.utils import tree_flatten  # noqa: E402

from worker.transcription.engine import load_stt_engine  # noqa: E402


@pytest.fixture(scope="module")
def whisper_path() -> str:
    return str(ensure_checkpoint("whisper"))


@pytest.fixture(scope="module")
def engine(whisper_path):
    return load_stt_engine(whisper_path, "float32")


@pytest.fixture(scope="module")
def reference(whisper_path):
    from mlx_audio.stt.models.whisper.whisper import Model, ModelDimensions
    from mlx_audio.utils import load_weights

    path = Path(whisper_path)
    model = Model(
        ModelDimensions.from_dict(json.loads((path / "config.json").read_text())), mx.float32
    )
    model.load_weights(list(model.sanitize(load_weights(path)).items()), strict=True)
    mx.eval(model.parameters())
    model.eval()
    return Model.post_load_hook(model, path)


def test_every_weight_is_the_stored_float32_value(engine, reference, whisper_path):
    got, want = (
        dict(tree_flatten(engine.model.parameters())),
        dict(tree_flatten(reference.parameters())),
    )
    assert set(got) == set(want)
    for name, value in got.items():
        assert value.dtype == mx.float32, name
        assert mx.array_equal(value, want[name]).item(), name  # not rounded through float16
    assert engine.model.dtype == mx.float32
    assert engine.model.encoder._positional_embedding.dtype == mx.float32


def test_auto_keeps_mlx_audios_float16(whisper_path):
    model = load_stt_engine(whisper_path).model
    assert model.dtype == mx.float16 and model.encoder.conv1.weight.dtype == mx.float16


def test_transcription_equals_mlx_audio_in_float32(engine, reference, tmp_path):
    parts = [speech_wav(tmp_path / f"{i}.wav", s, seed=i) for i, s in enumerate(SENTENCES)]
    audio = concat_wavs(tmp_path / "long.wav", parts, math.ceil(34 / sum(map(duration, parts))))
    inputs = TranscribeInputs(audio=audio.read_bytes(), filename=audio.name, language="en")
    deltas = [engine.admit(Submit("r", inputs, stream=True))]
    while deltas[-1].finish_reason is None:
        deltas.extend(engine.step())
    want = reference.generate(str(audio), language="en", fp16=False)
    assert "".join(d.text for d in deltas) == want.text.strip()
    assert [(s.start, s.end, s.text) for s in deltas[-1].segments] == [
        (s["start"], s["end"], s["text"]) for s in want.segments
    ]
