"""Helpers of the speech-out tests: the text they speak, a sine reference clip, a `TtsEngine`
driven in-process (unit tests) and mlx-audio's own generation, which the audio must equal.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
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


class _Grouping:
    """Stands in for a Qwen3-TTS codec decoder: buffers the frames mlx-audio's generator sends
    one chunk at a time and decodes them with the real decoder in the groups of the speech
    engine's schedule (worker/speech/staged.py CHUNK_FRAMES), the schedule starting again
    after each reset (a request's or a text segment's end, where the frames left are decoded).
    `decoded`: every group's audio, in order; `codes`: every chunk of codes sent, in order."""

    def __init__(self, real: Any) -> None:
        from worker.speech.staged import CHUNK_FRAMES

        self._real, self._schedule = real, CHUNK_FRAMES
        self._frames: list[Any] = []
        self._groups = 0
        self.decoded: list[Any] = []
        self.codes: list[Any] = []

    def _decode(self) -> Any:
        import mlx.core as mx

        codes = mx.concatenate(self._frames, axis=2)
        self._frames = []
        self._groups += 1
        wav = self._real.streaming_step(codes)
        self.decoded.append(wav.squeeze(1)[0])
        return wav

    def streaming_step(self, codes: Any) -> Any:
        import mlx.core as mx

        self._frames.append(codes)
        self.codes.append(codes)
        wanted = self._schedule[min(self._groups, len(self._schedule) - 1)]
        if sum(f.shape[2] for f in self._frames) >= wanted:
            return self._decode()
        return mx.zeros((codes.shape[0], 1, 0))

    def reset_streaming_state(self) -> None:
        if self._frames:
            self._decode()
        self._groups = 0
        self._real.reset_streaming_state()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@contextlib.contextmanager
def grouped_as_served(model: Any) -> Iterator[_Grouping]:
    """While inside, `model`'s (a Qwen3-TTS's) codec decodes in the server's chunks."""
    tokenizer = model.speech_tokenizer
    before = vars(tokenizer).get("decoder")  # mlx-audio's mx.compile wrapper, an attribute
    grouping = _Grouping(tokenizer.decoder)
    object.__setattr__(tokenizer, "decoder", grouping)
    try:
        yield grouping
    finally:
        if before is None:
            object.__delattr__(tokenizer, "decoder")
        else:
            object.__setattr__(tokenizer, "decoder", before)


def generated_audio(model: Any, **kwargs: Any) -> list[Any]:
    """The audio arrays of `model.generate(**kwargs)`. A Qwen3-TTS call runs mlx-audio's own
    code predictor (the worker's is compiled: worker/speech/qwen3_compiled.py), and when
    streamed, its codec decodes in the server's chunks (`grouped_as_served`)."""
    if "qwen3_tts" not in type(model).__module__:
        return [r.audio for r in model.generate(**kwargs)]
    from worker.speech.qwen3_compiled import uninstalled

    with uninstalled(model):
        if not kwargs.get("stream"):
            return [r.audio for r in model.generate(**kwargs)]
        with grouped_as_served(model) as grouping:
            for _ in model.generate(**kwargs):
                pass
    return grouping.decoded


def direct_qwen3_pcm(model: Any, seed: int, **kwargs: Any) -> bytes:
    """mlx-audio's Qwen3-TTS on its own, `mx.random.seed(seed)`, `model.generate(**kwargs)`
    streamed a frame at a time (the worker's call), its codec decoding in the server's chunks,
    as int16 PCM: what the server's audio must equal."""
    import mlx.core as mx

    from worker.speech.audio import to_pcm16

    kwargs.setdefault("text", TEXT)
    mx.random.seed(seed)
    audio = generated_audio(model, stream=True, streaming_interval=0.08, **kwargs)
    return b"".join(to_pcm16(np.asarray(a, dtype=np.float32)) for a in audio)


def direct_phrases_pcm(model: Any, seed: int, phrases: list[str], **kwargs: Any) -> list[bytes]:
    """Each phrase as `direct_qwen3_pcm` speaks it, seeded, but going on from the phrase
    before (worker/speech/continuation.py: its text and the frames mlx-audio made for it), as
    the server speaks a run of phrases."""
    import mlx.core as mx

    from worker.speech.audio import to_pcm16
    from worker.speech.continuation import Context, continuing
    from worker.speech.qwen3_compiled import uninstalled

    out, context = [], None
    for phrase in phrases:
        mx.random.seed(seed)
        continued = contextlib.nullcontext() if context is None else continuing(model, context)
        with uninstalled(model), continued, grouped_as_served(model) as grouping:
            for _ in model.generate(text=phrase, stream=True, streaming_interval=0.08, **kwargs):
                pass
        audio = grouping.decoded
        out.append(b"".join(to_pcm16(np.asarray(a, dtype=np.float32)) for a in audio))
        context = Context(phrase, mx.concatenate(grouping.codes, axis=2))
    return out
