"""Which speech-recognition family a checkpoint directory holds, without importing MLX.

mlx-audio classifies its models from `config.json`'s `model_type` and, for checkpoints that
lack one (NeMo Parakeet exports), from the repository name; `mlx_audio.registry` does that
from data alone. The worker uses `stt_family` to pick the speech-in engine for a checkpoint
and to fail at start, with the list of what would work, for anything else.
"""

from __future__ import annotations

import json
from pathlib import Path

# Speech-to-text families that do not transcribe free speech: forced aligners need the text.
NOT_TRANSCRIBERS = frozenset({"qwen3_forced_aligner"})


class UnsupportedSpeechModel(ValueError):
    """The checkpoint is not a speech-recognition model this server can serve."""


def supported_families() -> list[str]:
    """Every `model_type` mlx-audio's STT loader accepts (families and aliases), sorted."""
    from mlx_audio.registry import SUPPORTED_MODEL_TYPES

    return sorted(SUPPORTED_MODEL_TYPES.get("stt", frozenset()) - NOT_TRANSCRIBERS)


def read_model_type(path: str | Path) -> str:
    """`model_type` (or `architecture`) from the checkpoint's config.json; "" when absent."""
    config_path = Path(path) / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ""
    except (OSError, ValueError) as exc:
        raise UnsupportedSpeechModel(f"{config_path}: unreadable config.json ({exc})") from None
    if not isinstance(config, dict):
        return ""
    value = config.get("model_type") or config.get("architecture") or ""
    return str(value).lower()


def stt_family(path: str | Path) -> str | None:
    """The checkpoint's speech-recognition family (e.g. "whisper", "qwen3_asr"), or None when
    it is not a speech-recognition checkpoint at all (a text model, a TTS model, ...)."""
    from mlx_audio.registry import classify_model

    model_type = read_model_type(path)
    if classify_model(model_type, Path(path).name) != "stt":
        return None
    return model_type or "stt"


def require_stt_family(path: str | Path) -> str:
    """`stt_family(path)`, or UnsupportedSpeechModel naming the families that would work."""
    family = stt_family(path)
    if family is None or family in NOT_TRANSCRIBERS:
        model_type = read_model_type(path) or "(none)"
        raise UnsupportedSpeechModel(
            f"{path} is not a speech-recognition model this server can serve "
            f"(model_type {model_type}); supported families: {', '.join(supported_families())}"
        )
    return family
