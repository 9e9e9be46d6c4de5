"""Qwen3-TTS's compiled code predictor step (worker/speech/qwen3_compiled.py): bit for bit
the stock module's logits and caches over several frames, calls it does not recognise go to the
module, and installing is once and reversible."""

from __future__ import annotations

import mlx.core as mx
import pytest

from worker.speech.engine import load_tts_engine
from worker.speech.qwen3_compiled import CompiledCodePredictor, install, uninstalled
from worker.tiny_models import ensure_checkpoint


@pytest.fixture(scope="module")
def model():
    return load_tts_engine(str(ensure_checkpoint("qwen3_tts"))).model


def frames(model, predictor, count: int = 3) -> list[mx.array]:
    """The code predictor's 15 steps for `count` frames, greedy, as mlx-audio runs them (its
    cache reset each frame): every step's logits and, at the end, the layers' keys."""
    talker = model.talker
    mx.random.seed(0)
    out = []
    cache = predictor.make_cache()
    for _ in range(count):
        for c in cache:
            c.keys, c.values, c.offset = None, None, 0
        hidden = mx.random.normal((1, 1, model.config.talker_config.hidden_size))
        token = mx.random.randint(0, 64, (1, 1))
        x = mx.concatenate([hidden, talker.get_input_embeddings()(token)], axis=1)
        for step in range(model.config.talker_config.num_code_groups - 1):
            if step:
                x = predictor.codec_embedding[step - 1](token)
            logits, cache, following = predictor(x, cache=cache, generation_step=step)
            assert following == step + 1
            token = mx.argmax(logits[:, -1:, :], axis=-1)
            out.append(logits)
        out += [c.keys[..., : c.offset, :] for c in cache]
    return out


def test_the_compiled_step_equals_the_stock_one_bit_for_bit(model):
    compiled = vars(model.talker)["code_predictor"]
    assert isinstance(compiled, CompiledCodePredictor)
    with uninstalled(model):
        stock = frames(model, model.talker.code_predictor)
    got = frames(model, compiled)
    assert len(got) == len(stock)
    assert all(mx.array_equal(a, b).item() for a, b in zip(got, stock, strict=True))
    # One traced graph per step of a frame, reused in every later frame.
    assert len(compiled._steps) == model.config.talker_config.num_code_groups - 1


def test_calls_it_does_not_recognise_go_to_the_module(model):
    compiled = vars(model.talker)["code_predictor"]
    before = dict(compiled._steps)
    x = mx.ones((1, 1, model.config.talker_config.hidden_size))
    positions = mx.array([[3]])
    calls = (
        lambda: {"cache": None},
        lambda: {"cache": compiled.make_cache(), "position_ids": positions},
        lambda: {"cache": compiled.make_cache(), "generation_step": 3},  # not at step 3's offset
    )
    for call in calls:
        logits, _, _ = compiled(x, **call())
        with uninstalled(model):
            want, _, _ = model.talker.code_predictor(x, **call())
        assert mx.array_equal(logits, want).item()
    assert compiled._steps == before


def test_install_is_once_and_uninstalled_puts_it_back(model, monkeypatch):
    compiled = vars(model.talker)["code_predictor"]
    install(model)
    assert vars(model.talker)["code_predictor"] is compiled
    with uninstalled(model):
        assert "code_predictor" not in vars(model.talker)
        assert not isinstance(model.talker.code_predictor, CompiledCodePredictor)
    assert vars(model.talker)["code_predictor"] is compiled


def test_it_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("VOMLX_SPEECH_COMPILE", "0")
    engine = load_tts_engine(str(ensure_checkpoint("qwen3_tts")))
    assert "code_predictor" not in vars(engine.model.talker)
