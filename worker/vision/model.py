"""Which checkpoints mlx-vlm serves, and loading one: the model, its processor and their facts.

`vlm_model_type` reads config.json without importing MLX; `load_vision_model` loads through
`mlx_vlm.load` (the path a direct mlx-vlm user takes) and wraps the processor's tokenizer in
mlx-lm's `TokenizerWrapper`, so the per-request text machinery (worker/text/request.py:
sampler, logits processors, stop strings, EOS, detokenizing, parsers, logprobs) runs unchanged.
The wrapper uses mlx-vlm's own streaming detokenizer and mlx-vlm's EOS set (its
`StoppingCriteria`), so text and stops agree with `mlx_vlm.generate`. Runs on the MLX thread.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worker.text.padded_vocab import skip_tokens_without_entry
from worker.text.request import TokenTexts
from worker.text.sampling import load_sampling_defaults

OMNI_EXTRA_HINT = "install the [omni] extra (mlx-vlm) to serve image and audio input"


class UnsupportedVisionModel(ValueError):
    """The checkpoint is not a model mlx-vlm can serve."""


def read_config(path: str | Path) -> dict[str, Any]:
    """The checkpoint's config.json ({} when absent or not an object)."""
    try:
        config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return config if isinstance(config, dict) else {}


def model_sections(config: dict[str, Any]) -> dict[str, Any]:
    """The part of config.json holding `text_config` / `vision_config` / `audio_config`:
    the top level, or `thinker_config` for omni models that nest their text-out model
    there (Qwen2.5-Omni, Qwen3-Omni)."""
    thinker = config.get("thinker_config")
    return thinker if isinstance(thinker, dict) else config


def has_media_config(config: dict[str, Any]) -> bool:
    """Whether config.json describes a vision or audio encoder (an mlx-vlm checkpoint)."""
    sections = model_sections(config)
    return isinstance(sections.get("vision_config"), dict) or isinstance(
        sections.get("audio_config"), dict
    )


def mlx_vlm_installed() -> bool:
    return importlib.util.find_spec("mlx_vlm") is not None


def supported_model_types() -> list[str]:
    """Every model_type mlx-vlm's loader has a module for, sorted."""
    import mlx_vlm.models

    return sorted(m.name for m in pkgutil.iter_modules(mlx_vlm.models.__path__) if m.ispkg)


def vlm_model_type(path: str | Path) -> str:
    """The mlx-vlm model type of the checkpoint (UnsupportedVisionModel naming the supported
    ones when mlx-vlm has no module for it)."""
    if not mlx_vlm_installed():
        raise UnsupportedVisionModel(f"mlx-vlm is not installed: {OMNI_EXTRA_HINT}")
    from mlx_vlm.utils import get_model_type

    config = read_config(path)
    model_type = get_model_type(config) if config else None
    supported = supported_model_types()
    if model_type not in supported:
        raise UnsupportedVisionModel(
            f"{path}: model_type {model_type or '(none)'} is not supported by mlx-vlm; "
            f"supported: {', '.join(supported)}"
        )
    return model_type


@dataclass(frozen=True)
class VisionModel:
    """A loaded mlx-vlm checkpoint and the facts the engine and TextRequest need."""

    path: str
    model: Any  # mlx.nn.Module
    processor: Any  # mlx-vlm's processor (tokenizer, image processor, detokenizer, ...)
    tokenizer: Any  # mlx_lm TokenizerWrapper around processor.tokenizer
    max_context: int | None
    vocab_size: int
    takes_images: bool
    takes_audio: bool
    audio_sample_rate: int
    sampling_defaults: dict[str, Any] = field(default_factory=dict)
    token_texts: Any = None
    # Whether the processor itself turns frames into video inputs (Qwen-VL's video processor);
    # other image models get a video's frames as still images, as mlx-vlm sends them.
    video_processor: bool = False


def load_vision_model(path: str) -> VisionModel:
    """Loads a local mlx-vlm checkpoint directory; raises on any failure."""
    if not Path(path).is_dir():
        raise FileNotFoundError(f"model directory {path!r} does not exist")
    vlm_model_type(path)
    # mlx-vlm's processors ask the hub for optional files a local checkpoint lacks; the
    # worker only serves local directories, so it must never wait on a network lookup.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from mlx_lm.tokenizer_utils import TokenizerWrapper
    from mlx_vlm import load
    from mlx_vlm.generate.video import processor_handles_video
    from mlx_vlm.tokenizer_utils import load_tokenizer

    model, processor = load(path)
    detokenizer = getattr(processor, "detokenizer", None)  # its generator's (text unused)
    if detokenizer is not None:
        skip_tokens_without_entry(detokenizer)
    raw_tokenizer = getattr(processor, "tokenizer", processor)
    criteria = getattr(raw_tokenizer, "stopping_criteria", None)
    eos_ids = list(criteria.eos_token_ids) if criteria is not None else None
    tokenizer = TokenizerWrapper(
        raw_tokenizer,
        load_tokenizer(Path(path), return_tokenizer=False),
        eos_token_ids=eos_ids,
    )
    config = read_config(path)
    sections = model_sections(config)
    text_config = sections.get("text_config") or {}
    max_context = text_config.get("max_position_embeddings") or config.get(
        "max_position_embeddings"
    )
    vocab_size = text_config.get("vocab_size") or config.get("vocab_size") or len(tokenizer)
    extractor = getattr(processor, "feature_extractor", None)
    return VisionModel(
        path=path,
        model=model,
        processor=processor,
        tokenizer=tokenizer,
        max_context=int(max_context) if max_context else None,
        vocab_size=int(vocab_size),
        takes_images=isinstance(sections.get("vision_config"), dict),
        takes_audio=isinstance(sections.get("audio_config"), dict) and extractor is not None,
        audio_sample_rate=int(getattr(extractor, "sampling_rate", 16000) or 16000),
        sampling_defaults=load_sampling_defaults(path),
        token_texts=TokenTexts(tokenizer),
        video_processor=processor_handles_video(processor),
    )
