"""Helpers of the speech-out tests: the text they speak, a sine reference clip, a `TtsEngine`
driven in-process (unit tests) and mlx-audio's own generation, which the audio must equal.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import soundfile

from protocol.inputs import SpeechInputs
from protocol.messages import Submit

TEXT = "Hello there. How are you today?"


def sine_wav(seconds: float, rate: int, hz: float = 220.0) -> bytes:
    """A 16-bit WAV of a sine at `hz` (amplitude 0.3): a reference clip to clone a voice from."""
    t = np.arange(int(seconds * rate)) / rate
    buffer = io.BytesIO()
    soundfile.write(buffer, 0.3 * np.sin(2 * np.pi * hz * t), rate, format="WAV")
    return buffer.getvalue()


def submit(rid: str, text: str = TEXT, **inputs: Any) -> Submit:
    return Submit(rid, SpeechInputs(text, **inputs), True)


def run(engine: Any, *submits: Submit) -> dict[str, list]:
    """Every delta of every request, admit to terminal, stepping all of them together."""
    out: dict[str, list] = {}
    for s in submits:
        out[s.request_id] = [engine.admit(s)]
    while engine.active_ids():
        for delta in engine.step():
            out[delta.request_id].append(delta)
    return out


def direct_mono_pcm(model: Any, seed: int, ref_file: Path | None = None, **kwargs: Any) -> bytes:
    """mlx-audio on its own, as its CLI calls it, as int16 PCM: the reference audio read at the
    model's rate with `load_audio`, `mx.random.seed(seed)`, `model.generate(text=TEXT, ...)`;
    multi-channel audio averaged to mono, as the server documents."""
    import mlx.core as mx
    from mlx_audio.utils import load_audio

    from worker.speech.audio import to_pcm16

    if ref_file is not None:
        kwargs["ref_audio"] = load_audio(str(ref_file), sample_rate=model.sample_rate)
    mx.random.seed(seed)
    chunks = []
    for result in model.generate(text=TEXT, **kwargs):
        audio = np.asarray(result.audio, dtype=np.float32)
        chunks.append(to_pcm16(audio.mean(axis=1) if audio.ndim == 2 else audio))
    return b"".join(chunks)
