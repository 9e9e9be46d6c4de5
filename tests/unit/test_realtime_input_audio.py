"""The realtime input side: the 24 -> 16 kHz resampler, OpenAI's server_vad rule, the input
buffer's turns, and Silero VAD itself on speech and silence (the pinned ONNX model)."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.api.realtime.input_audio import InputBuffer
from gateway.api.realtime.vad import (
    WINDOW,
    Downsampler,
    SpeechProbability,
    TurnDetector,
    TurnRule,
    TurnSettings,
)
from gateway.api.realtime.wire import EventError
from tests.support.spoken import require


def pcm(samples: np.ndarray) -> bytes:
    return np.clip(samples * 32767, -32768, 32767).astype("<i2").tobytes()


def test_the_downsampler_gives_the_same_samples_however_the_audio_is_cut():
    audio = pcm(np.sin(np.arange(24000) * 2 * np.pi * 440 / 24000) * 0.5)
    whole = Downsampler()(audio)
    cut = Downsampler()
    pieces = np.concatenate([cut(audio[at : at + 962]) for at in range(0, len(audio), 962)])
    assert len(whole) == len(pieces) >= 15990
    np.testing.assert_array_equal(whole, pieces)
    reference = np.sin(np.arange(len(whole)) * 2 * np.pi * 440 / 16000) * 0.5
    assert np.max(np.abs(whole - reference)) < 0.01


def test_server_vad_starts_at_the_threshold_and_stops_after_the_silence():
    rule = TurnRule(TurnSettings(threshold=0.5, prefix_padding_ms=300, silence_duration_ms=96))
    probabilities = [0.1, 0.2, 0.9, 0.9, 0.4, 0.9, 0.2, 0.45, 0.1, 0.1]
    turns = [(i, rule.step(p, i * 32, 32)) for i, p in enumerate(probabilities)]
    events = [(i, t.kind, t.ms) for i, t in turns if t is not None]
    # Starts at window 2 (64 ms, padded back to 0); 0.4 is within the hysteresis and does not
    # start the silence; from window 6 three windows under it (0.45 continues a silence) end it.
    assert events == [(2, "started", 0), (8, "stopped", 288)]


class Scripted:
    """A detector that hears speech where the samples are loud."""

    def __call__(self, window: np.ndarray) -> float:
        return float(np.abs(window).max() > 0.1)


def test_the_input_buffer_cuts_a_turn_with_its_prefix_padding():
    detector = TurnDetector(
        Scripted(), TurnSettings(prefix_padding_ms=200, silence_duration_ms=320)
    )
    buffer = InputBuffer(detector)
    silence, speech = np.zeros(24000), np.full(24000, 0.5)
    turns, turn = [], b""
    for part in (silence, speech, silence):
        audio = pcm(part)
        for at in range(0, len(audio), 4800):
            turns += buffer.append(audio[at : at + 4800])
            if turns and turns[-1].kind == "stopped" and not turn:  # as the session does
                turn = buffer.take(turns[0].ms, turns[-1].ms)
    assert [t.kind for t in turns] == ["started", "stopped"]
    start, end = turns[0].ms, turns[1].ms
    assert 750 <= start <= 850 and 2300 <= end <= 2400
    assert len(turn) == (end - start) * 48
    assert buffer.duration_ms <= 200 + 200  # between turns: about the prefix padding


def test_a_commit_needs_100_ms_and_a_full_buffer_is_refused():
    buffer = InputBuffer(None)
    buffer.append(b"\0\0" * 2000)
    with pytest.raises(EventError) as error:
        buffer.commit()
    assert error.value.code == "input_audio_buffer_commit_empty"
    buffer.append(b"\0\0" * 1000)
    assert len(buffer.commit()) == 6000 and buffer.duration_ms == 0


@pytest.mark.real_weights
def test_silero_hears_speech_in_espeak_audio_and_none_in_noise(tmp_path):
    import subprocess
    import wave

    from gateway.api.realtime.vad import inference_session

    try:
        session = inference_session()
    except Exception as exc:  # the pinned wheel cannot be downloaded here
        pytest.skip(f"Silero VAD unavailable: {exc}")
    require("espeak-ng", "sox")
    path = tmp_path / "s.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(path), "The weather is nice today."],
                   check=True)  # fmt: skip
    subprocess.run(["sox", str(path), "-r", "16000", str(tmp_path / "16k.wav")], check=True)
    with wave.open(str(tmp_path / "16k.wav")) as f:
        speech = np.frombuffer(f.readframes(f.getnframes()), "<i2").astype(np.float32) / 32768
    noise = np.random.default_rng(0).normal(0, 0.01, 16000).astype(np.float32)
    detect = SpeechProbability(session)
    heard = [detect(speech[i : i + WINDOW]) for i in range(0, len(speech) - WINDOW, WINDOW)]
    detect.reset()
    quiet = [detect(noise[i : i + WINDOW]) for i in range(0, len(noise) - WINDOW, WINDOW)]
    assert np.mean(np.array(heard) > 0.5) > 0.6
    assert max(quiet) < 0.2
