"""Server VAD of `/v1/realtime`: Silero VAD's speech probability per 32 ms, and the turn
detector that turns it into OpenAI's `speech_started` / `speech_stopped`.

Silero VAD (v6, MIT) is the Silero team's ONNX model from the pinned `silero-vad` wheel
(protocol/pinned_models.SILERO_VAD, fetched once into the cache like the real models), run by
onnxruntime exactly as the package's own ONNX wrapper runs it: 512 new samples at 16 kHz a
call, the previous call's last 64 in front, the LSTM state carried. One inference session is
shared by every realtime session (onnxruntime's `run` is thread-safe), one thread each (its
cost per window: docs/speech.md, "Voice activity"); each stream keeps its own state. It was chosen over WebRTC VAD by
measuring both (scripts/measure_vad.py, docs/speech.md "Voice activity"), and its output is a
probability, which is what `turn_detection.threshold` means in OpenAI's API.

Input audio is PCM16 at 24 kHz (the API's format); the detector hears it at 16 kHz through a
streaming linear-interpolation resampler (plenty for voice activity; the speech recognizer
gets the 24 kHz audio itself).
"""

from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gateway.api.realtime.wire import EventError
from protocol.launch.python import python_module

RATE = 16000
WINDOW = 512  # samples a call: 32 ms
WINDOW_MS = WINDOW * 1000 // RATE
CONTEXT = 64
INPUT_RATE = 24000
# Silero's own rule: speech ends when the probability falls below threshold - 0.15.
HYSTERESIS = 0.15

_session = None
_session_lock = threading.Lock()


def model_path() -> Path:
    """The Silero VAD file, fetched into the cache once by the converting process (the gateway
    does not import the worker's packages)."""
    done = subprocess.run(
        [*python_module("worker.convert.packages"), "--file", "silero-vad"],
        stdout=subprocess.PIPE,
        text=True,
        timeout=600,
    )
    lines = done.stdout.split()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the Silero VAD file could not be had (exit status {done.returncode})")
    return Path(lines[-1])


def inference_session():
    """The shared onnxruntime session, made (and the weights fetched) on first use; blocking,
    so callers run it off the event loop."""
    global _session
    with _session_lock:
        if _session is None:
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            options.log_severity_level = 3  # its unused-initializer warnings
            _session = onnxruntime.InferenceSession(
                str(model_path()), options, providers=["CPUExecutionProvider"]
            )
        return _session


def vad_session():
    """`inference_session()`, or the `error` event that says the server VAD is unavailable."""
    try:
        return inference_session()
    except Exception as exc:  # the weights could not be fetched, onnxruntime is missing
        raise EventError(f"server VAD is unavailable ({exc}): set turn_detection to null and "
                         "commit the input audio yourself", "session.turn_detection",
                         "vad_unavailable", "server_error") from None  # fmt: skip


class SpeechProbability:
    """One stream's Silero VAD: the probability that each 512-sample window is speech."""

    def __init__(self, session) -> None:
        self._session = session
        self._rate = np.array(RATE, np.int64)
        self.reset()

    def reset(self) -> None:
        self._state = np.zeros((2, 1, 128), np.float32)
        self._context = np.zeros((1, CONTEXT), np.float32)

    def __call__(self, window: np.ndarray) -> float:
        x = np.concatenate([self._context, window.astype(np.float32)[None, :]], axis=1)
        out, self._state = self._session.run(
            None, {"input": x, "state": self._state, "sr": self._rate}
        )
        self._context = x[:, -CONTEXT:]
        return float(out[0, 0])


class Downsampler:
    """24 kHz int16 in, 16 kHz float32 out, continuous across chunks (linear interpolation at
    output sample j's position 1.5 j)."""

    def __init__(self) -> None:
        self._pending = np.zeros(0, np.float32)
        self._offset = 0  # input samples dropped from _pending so far
        self._next = 0  # index of the next output sample

    def __call__(self, pcm16: bytes) -> np.ndarray:
        samples = np.frombuffer(pcm16, "<i2").astype(np.float32) / 32768.0
        self._pending = np.concatenate([self._pending, samples])
        available = self._offset + len(self._pending)
        # Output j needs inputs floor(1.5 j) and floor(1.5 j) + 1.
        last = (2 * (available - 2)) // 3 if available >= 2 else -1
        if last < self._next:
            return np.zeros(0, np.float32)
        positions = np.arange(self._next, last + 1) * (INPUT_RATE / RATE) - self._offset
        base = np.floor(positions).astype(np.int64)
        frac = (positions - base).astype(np.float32)
        out = self._pending[base] * (1 - frac) + self._pending[base + 1] * frac
        self._next = last + 1
        keep = int(np.floor(self._next * INPUT_RATE / RATE)) - self._offset
        self._pending = self._pending[keep:]
        self._offset += keep
        return out


@dataclass(slots=True)
class TurnSettings:
    """`turn_detection` of type server_vad: OpenAI's fields and defaults."""

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500


@dataclass(slots=True)
class Turn:
    """An event of the detector: speech `started` at `ms`, or `stopped` at `ms` (both in ms of
    input audio since the session began, the start already moved back by the prefix padding;
    the end after the silence that ended it, as OpenAI's `audio_end_ms`). A stop also says
    where that silence began (`speech_end_ms`)."""

    kind: str  # "started" | "stopped"
    ms: int
    speech_end_ms: int | None = None


class TurnRule:
    """Speech starts at the first window at or above the threshold; it stops once windows
    below threshold - HYSTERESIS (or, once silence began, below the threshold) have lasted
    `silence_duration_ms`. Windows of any length (WebRTC VAD's are 30 ms). While a silence
    that may end the turn lasts, `silence_start_ms` says where it began (else None)."""

    def __init__(self, settings: TurnSettings) -> None:
        self.settings = settings
        self.speaking = False
        self._silent_ms = 0
        self.silence_start_ms: int | None = None

    def step(self, p: float, start_ms: int, window_ms: int) -> Turn | None:
        s = self.settings
        if not self.speaking:
            if p >= s.threshold:
                self.speaking, self._silent_ms = True, 0
                return Turn("started", max(0, start_ms - s.prefix_padding_ms))
            return None
        if p < s.threshold - HYSTERESIS or (p < s.threshold and self._silent_ms):
            if not self._silent_ms:
                self.silence_start_ms = start_ms
            self._silent_ms += window_ms
            if self._silent_ms >= s.silence_duration_ms:
                speech_end_ms = self.silence_start_ms
                self.reset()
                return Turn("stopped", start_ms + window_ms, speech_end_ms)
        else:
            self._silent_ms, self.silence_start_ms = 0, None
        return None

    def reset(self) -> None:
        self.speaking, self._silent_ms, self.silence_start_ms = False, 0, None


class TurnDetector:
    """24 kHz PCM16 in; Silero's probability for each 32 ms; the turns TurnRule finds."""

    def __init__(self, probability: SpeechProbability, settings: TurnSettings,
                 start_ms: int = 0) -> None:  # fmt: skip
        self.rule = TurnRule(settings)
        self._probability = probability
        self._resample = Downsampler()
        self._buffer = np.zeros(0, np.float32)
        # Windows heard since the session began (a detector made later, when server VAD is
        # turned on again, starts at the session's time then).
        self._windows = start_ms // WINDOW_MS

    @property
    def speaking(self) -> bool:
        return self.rule.speaking

    @property
    def heard_ms(self) -> int:
        """Session time of the end of the audio judged so far."""
        return self._windows * WINDOW_MS

    @property
    def silence_start_ms(self) -> int | None:
        """Where a silence that may end the turn in progress began (None: none is going on)."""
        return self.rule.silence_start_ms

    def feed(self, pcm16: bytes) -> list[Turn]:
        """Hear more audio; the turn events it completes, in order (blocking, so callers with
        much audio run it off the event loop)."""
        self._buffer = np.concatenate([self._buffer, self._resample(pcm16)])
        events = []
        while len(self._buffer) >= WINDOW:
            window, self._buffer = self._buffer[:WINDOW], self._buffer[WINDOW:]
            turn = self.rule.step(self._probability(window), self._windows * WINDOW_MS, WINDOW_MS)
            self._windows += 1
            if turn is not None:
                events.append(turn)
        return events

    def reset(self) -> None:
        """Forget a turn in progress (the buffer was cleared or committed by hand)."""
        self.rule.reset()
