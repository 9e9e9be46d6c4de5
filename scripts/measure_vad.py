"""Silero VAD against WebRTC VAD on espeak-ng speech: the measurement that chose the realtime
API's voice-activity detector (docs/speech.md, "Voice activity").

    .venv/bin/python scripts/measure_vad.py [--sentences 10] [--gap 1.2]

A recording of sentences (tests/support/spoken.py: espeak-ng `en-us` at 130 words a minute)
with `--gap` seconds of silence between them, at 16 kHz, clean and with white noise added at
20, 10 and 5 dB SNR. The truth, per 10 ms: speech from a sentence's first to its last sample
above -40 dBFS (pauses between words count as speech). For each detector and condition:

- frames: the share of speech frames detected (recall) and of silence frames wrongly called
  speech (false alarms), at each detector's native frame (Silero 32 ms, WebRTC 30 ms);
- turns: OpenAI's server_vad rule (gateway/api/realtime/vad.TurnRule, threshold 0.5, 500 ms of
  silence ends a turn) over the decisions: turns found against sentences, and the delay from
  a sentence's true start to the window that starts its turn;
- cost: CPU microseconds per second of audio.

WebRTC VAD decides speech / not speech (a probability of 1 or 0) at an aggressiveness 0-3.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.api.realtime.vad import (  # noqa: E402
    WINDOW,
    SpeechProbability,
    TurnRule,
    TurnSettings,
    inference_session,
)
from tests.support.spoken import SENTENCES  # noqa: E402

RATE = 16000


def spoken(text: str, tmp: Path) -> np.ndarray:
    raw, out = tmp / "raw.wav", tmp / "16k.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "130", "-w", str(raw), text], check=True)
    subprocess.run(["sox", str(raw), "-r", str(RATE), "-c", "1", "-b", "16", str(out)], check=True)
    with wave.open(str(out)) as f:
        return np.frombuffer(f.readframes(f.getnframes()), "<i2").astype(np.float32) / 32768


def recording(count: int, gap: float) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The sentences with `gap` s of silence around each; their true (start, end) samples."""
    parts, spans, at = [], [], 0
    silence = np.zeros(int(gap * RATE), np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        for text in SENTENCES[:count]:
            clip = spoken(text, Path(tmp))
            loud = np.flatnonzero(np.abs(clip) > 0.01)
            parts += [silence, clip]
            at += len(silence)
            spans.append((at + int(loud[0]), at + int(loud[-1])))
            at += len(clip)
    parts.append(silence)
    return np.concatenate(parts), spans


def with_noise(audio: np.ndarray, snr_db: float | None, seed: int = 0) -> np.ndarray:
    if snr_db is None:
        return audio
    power = np.mean(audio[np.abs(audio) > 0.01] ** 2)
    noise = np.random.default_rng(seed).normal(0, np.sqrt(power / 10 ** (snr_db / 10)), len(audio))
    return np.clip(audio + noise.astype(np.float32), -1, 1)


def silero(audio: np.ndarray) -> tuple[list[float], int, float]:
    detector = SpeechProbability(inference_session())
    started = time.process_time()
    probs = [detector(audio[i : i + WINDOW]) for i in range(0, len(audio) - WINDOW + 1, WINDOW)]
    return probs, WINDOW, time.process_time() - started


def webrtc(audio: np.ndarray, mode: int) -> tuple[list[float], int, float]:
    import webrtcvad

    vad, frame = webrtcvad.Vad(mode), RATE * 30 // 1000
    pcm = (audio * 32767).astype("<i2").tobytes()
    started = time.process_time()
    decisions = [
        float(vad.is_speech(pcm[2 * i : 2 * (i + frame)], RATE))
        for i in range(0, len(audio) - frame + 1, frame)
    ]
    return decisions, frame, time.process_time() - started


def score(probs: list[float], frame: int, spans: list[tuple[int, int]], total: int) -> dict:
    truth = np.zeros(total, bool)
    for start, end in spans:
        truth[start:end] = True
    said = np.repeat(np.array(probs) >= 0.5, frame)
    truth = truth[: len(said)]
    rule, frame_ms, turns = TurnRule(TurnSettings()), frame * 1000 // RATE, []
    for i, p in enumerate(probs):
        turn = rule.step(p, i * frame_ms, frame_ms)
        if turn is not None and turn.kind == "started":
            turns.append((i + 1) * frame)  # when the detector knows: the window's end
    delays = []
    for start, end in spans:
        hits = [t for t in turns if start <= t <= end]
        if hits:
            delays.append((hits[0] - start) * 1000 / RATE)
    return {
        "recall": float(np.mean(said[truth])),
        "false_alarms": float(np.mean(said[~truth])),
        "turns": len(turns),
        "delay_ms": float(np.median(delays)) if delays else float("nan"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=10)
    parser.add_argument("--gap", type=float, default=1.2)
    args = parser.parse_args()
    if not shutil.which("espeak-ng") or not shutil.which("sox"):
        print("needs espeak-ng and sox (scripts/system_packages.sh)")
        return 2
    clean, spans = recording(args.sentences, args.gap)
    seconds = len(clean) / RATE
    print(
        f"{len(spans)} sentences, {seconds:.1f} s; truth: {sum(e - s for s, e in spans) / RATE:.1f} s of speech"
    )
    print(f"{'condition':>9} {'detector':>10} {'recall':>7} {'false alarms':>13} {'turns':>6} "
          f"{'start delay':>12} {'CPU us/s':>9}")  # fmt: skip
    for snr in (None, 20, 10, 5):
        audio = with_noise(clean, snr)
        runs = {"silero": silero(audio)}
        runs.update({f"webrtc-{m}": webrtc(audio, m) for m in range(4)})
        for name, (probs, frame, cpu) in runs.items():
            r = score(probs, frame, spans, len(audio))
            print(
                f"{'clean' if snr is None else f'{snr} dB':>9} {name:>10} {r['recall']:>7.3f} "
                f"{r['false_alarms']:>13.3f} {r['turns']:>3}/{len(spans):<2} "
                f"{r['delay_ms']:>9.0f} ms {cpu / seconds * 1e6:>9.0f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
