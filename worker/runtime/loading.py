"""Which engines a worker runs, and loading them: the main model plus optional speech models.

The main `--model` is classified from its config.json the way mlx-audio classifies checkpoints:
a speech-recognition model gets the speech-in engine, a TTS model the speech-out engine. Any
other model is served by mlx-lm (the text engine) or mlx-vlm (the vision engine, images and
audio in) as `--backend` says: "auto" picks mlx-vlm when config.json has a `vision_config` or
`audio_config` section, "text" forces mlx-lm, "omni" forces mlx-vlm (a clear error when mlx-vlm
is not installed or has no module for the model_type). `--speech-model` / `--transcription-model` add a
speech engine next to the main one, in the same worker and on the same MLX thread. `--omni`
insists that the main model is a speech model (a clear error otherwise). An embedding
checkpoint (a sentence-transformers folder, or a text encoder such as BERT:
worker/embedding/checkpoint.py) as the main model gets the embedding engine alone;
`--embedding-model` adds one next to the main model. A reranker (worker/embedding/checkpoint.py
`reranker_method`: a `*ForSequenceClassification` encoder, or an mlx-lm decoder whose path names
it a reranker) as the main model gets the rerank engine alone; `--rerank-model` adds one (any
causal LM given there is taken as an LLM reranker). Without a reranker, an embedding engine
scores pairs itself by cosine (the fallback, ScoreInfo.method "embedding-cosine").
An image-generation checkpoint (a diffusers-style folder mlx-vlm generates pictures with,
worker/images/model.py) as the main model gets the image engine alone; `--image-model` adds one
next to the main model; a video-generation checkpoint (worker/videos/model.py) likewise gets the
video engine, alone or next to the main model with `--video-model`. Everything here runs on the
MLX thread.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.ready import (
    Capability,
    EmbeddingInfo,
    ImageInfo,
    ScoreInfo,
    SpeechInfo,
    TextInfo,
    TranscriptionInfo,
    VideoInfo,
)
from worker.embedding.args import add_embedding_arguments, embedding_settings
from worker.embedding.checkpoint import LLM_RERANKER, is_embedding_checkpoint, reranker_method

# mlx-audio names its two kinds "tts" (speech) and "stt" (transcription)
TEXT, VISION, SPEECH, TRANSCRIPTION, EMBED = "text", "vision", "tts", "stt", "embed"
RERANK = "rerank"
IMAGE, VIDEO = "image", "video"
BACKENDS = ("auto", "text", "omni")
_EXTRA = {SPEECH: "tts", TRANSCRIPTION: "audio"}


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--speech-model", help="a TTS checkpoint served next to the main model (speech out)")
    add(
        "--transcription-model",
        help="a speech-recognition checkpoint served next to it (speech in)",
    )
    add("--image-model", help="an image-generation checkpoint served next to the main model")
    add("--video-model", help="a video-generation checkpoint served next to the main model")
    add("--omni", action="store_true", help="the main model is a speech model")
    add(
        "--backend",
        default="auto",
        choices=BACKENDS,
        help="auto: mlx-vlm for models with a vision/audio encoder, else mlx-lm; "
        "text: mlx-lm; omni: mlx-vlm",
    )
    add(
        "--vision-cache-entries",
        type=_non_negative,
        default=20,
        help="image feature sets kept for reuse by content (mlx-vlm models); 0: none",
    )
    add(
        "--voice-cache-bytes",
        type=_non_negative,
        default=64 << 20,
        help="Qwen3-TTS voices' prefix KV, x-vectors and reference codes kept for reuse; 0: none",
    )
    add(
        "--talker-max-frames",
        type=_non_negative,
        default=4096,
        help="codec frames (12.5 a second) Qwen3-Omni's own talker may speak an answer",
    )
    add("--reasoning-parser", default="auto", help="auto | none | qwen3 | deepseek_r1")
    add("--tool-call-parser", default="auto", help="auto | none | a format name")
    add("--chat-template", default=None, help="a Jinja chat template file (mlx-lm models)")
    add_embedding_arguments(parser)


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def model_kind(path: str) -> str:
    """TEXT, SPEECH or TRANSCRIPTION, from the checkpoint's config.json."""
    try:
        from mlx_audio.registry import classify_model
    except ImportError:  # no speech extra installed: only text models are servable
        return TEXT
    from worker.transcription.family import read_model_type

    kind = classify_model(read_model_type(path), Path(path).name)
    return kind if kind in (SPEECH, TRANSCRIPTION) else TEXT


def main_model_kind(path: str, backend: str = "auto") -> str:
    """TEXT, VISION, SPEECH, TRANSCRIPTION, EMBED, RERANK, IMAGE or VIDEO for the main model
    under `--backend`; raises ValueError (naming the fix) when the backend cannot serve it."""
    from worker.images.model import is_image_checkpoint
    from worker.videos.model import is_video_checkpoint
    from worker.vision.model import (
        OMNI_EXTRA_HINT,
        has_media_config,
        mlx_vlm_installed,
        read_config,
        vlm_model_type,
    )

    if backend not in BACKENDS:
        raise ValueError(f"unknown --backend {backend!r} ({', '.join(BACKENDS)})")
    if backend == "text":
        return TEXT
    if backend == "auto" and is_image_checkpoint(path):
        return IMAGE
    if backend == "auto" and is_video_checkpoint(path):
        return VIDEO
    if backend == "omni":
        vlm_model_type(path)  # raises naming the supported model types
        return VISION
    if reranker_method(path) is not None:
        return RERANK
    if is_embedding_checkpoint(path):
        return EMBED
    kind = model_kind(path)
    if kind != TEXT or not has_media_config(read_config(path)):
        return kind
    if not mlx_vlm_installed():
        raise ValueError(
            f"{path} has a vision or audio encoder: {OMNI_EXTRA_HINT}, "
            "or pass --backend text to serve its text part with mlx-lm"
        )
    vlm_model_type(path)
    return VISION


@dataclass
class LoadedEngines:
    engines: list[Any] = field(default_factory=list)  # runtime.engine.Engine, the main first
    capabilities: list[Capability] = field(default_factory=list)
    text: TextInfo | None = None  # the sections of Ready
    speech: SpeechInfo | None = None
    transcription: TranscriptionInfo | None = None
    embedding: EmbeddingInfo | None = None
    score: ScoreInfo | None = None
    image: ImageInfo | None = None
    video: VideoInfo | None = None
    tokenizer: Any = None  # the text model's, for count_tokens / tokenize (None without one)
    model: Any = None  # the text model's nn.Module, for mlx-lm's wired_limit
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        for close in self.closers:
            close()


def load_engines(args: argparse.Namespace, sharder: Any = None) -> LoadedEngines:
    """Loads every engine the arguments ask for (raises on any failure: the caller sends Fatal);
    `sharder`: the text model is split across a distributed group (worker/distributed/)."""
    kind = main_model_kind(args.model, getattr(args, "backend", "auto"))
    if args.omni and kind in (TEXT, VISION, EMBED, RERANK, IMAGE, VIDEO):
        raise ValueError(f"--omni: {args.model} is not a speech (TTS or speech-recognition) model")
    loaded = LoadedEngines()
    if kind != TEXT:
        _refuse_text_only_flags(args)
    if sharder is not None and kind != TEXT:
        raise ValueError(f"only mlx-lm text models can be split across ranks, not {args.model}")
    if kind == TEXT:
        _add_text(loaded, args, sharder)
    elif kind == VISION:
        _add_vision(loaded, args)
    elif kind == EMBED:
        _add_embedding(loaded, args.model, args)
    elif kind == RERANK:
        _add_reranker(loaded, args.model, args)
    elif kind == IMAGE:
        _add_image(loaded, args.model)
    elif kind == VIDEO:
        _add_video(loaded, args.model)
    else:
        _add_speech(loaded, kind, args.model, args)
    for extra_kind, path in (
        (SPEECH, args.speech_model),
        (TRANSCRIPTION, args.transcription_model),
    ):
        if path:
            found = model_kind(path)
            if found != extra_kind:
                raise ValueError(
                    f"--{'speech' if extra_kind == SPEECH else 'transcription'}-model {path} is "
                    f"not a {'speech' if extra_kind == SPEECH else 'transcription'} checkpoint "
                    f"(install the [{_EXTRA[extra_kind]}] extra if it is one)"
                )
            _add_speech(loaded, extra_kind, path, args)
    embedding_model = getattr(args, "embedding_model", None)
    if embedding_model:
        if kind == EMBED:
            raise ValueError(f"--embedding-model: the main model {args.model} embeds already")
        if not is_embedding_checkpoint(embedding_model):
            raise ValueError(
                f"--embedding-model {embedding_model} is not an embedding checkpoint (a "
                "sentence-transformers folder, or a text encoder such as BERT)"
            )
        _add_embedding(loaded, embedding_model, args)
    rerank_model = getattr(args, "rerank_model", None)
    if rerank_model:
        if kind == RERANK:
            raise ValueError(f"--rerank-model: the main model {args.model} reranks already")
        _add_reranker(loaded, rerank_model, args, LLM_RERANKER)
    image_model = getattr(args, "image_model", None)
    if image_model:
        if kind == IMAGE:
            raise ValueError(f"--image-model: the main model {args.model} makes images already")
        from worker.images.model import is_image_checkpoint

        if not is_image_checkpoint(image_model):
            raise ValueError(
                f"--image-model {image_model} is not an image-generation checkpoint (a "
                "diffusers-style folder mlx-vlm generates images with; install the [images] "
                "extra if it is one)"
            )
        _add_image(loaded, image_model)
    video_model = getattr(args, "video_model", None)
    if video_model:
        if kind == VIDEO:
            raise ValueError(f"--video-model: the main model {args.model} makes video already")
        from worker.videos.model import is_video_checkpoint

        if not is_video_checkpoint(video_model):
            raise ValueError(
                f"--video-model {video_model} is not a video-generation checkpoint (a "
                "MiniMax-H3 folder mlx-vlm generates video with; install the [images] extra "
                "if it is one)"
            )
        _add_video(loaded, video_model)
    if loaded.score is None:
        _score_by_embeddings(loaded)
    return loaded


def _add_image(loaded: LoadedEngines, path: str) -> None:
    from worker.images.engine import load_image_engine

    engine = load_image_engine(path)
    loaded.engines.append(engine)
    loaded.image = engine.ready_info()
    loaded.capabilities += [c for c in engine.capabilities() if c not in loaded.capabilities]


def _add_video(loaded: LoadedEngines, path: str) -> None:
    from worker.videos.engine import load_video_engine

    engine = load_video_engine(path)
    loaded.engines.append(engine)
    loaded.closers.append(engine.close)
    loaded.video = engine.ready_info()
    loaded.capabilities += [c for c in engine.capabilities() if c not in loaded.capabilities]


def _add_reranker(
    loaded: LoadedEngines, path: str, args: argparse.Namespace, method: str | None = None
) -> None:
    from worker.embedding.engine import load_rerank_engine

    engine = load_rerank_engine(path, embedding_settings(args), method)
    loaded.engines.append(engine)
    loaded.score = engine.ready_info()
    loaded.capabilities += [c for c in engine.capabilities() if c not in loaded.capabilities]


def _score_by_embeddings(loaded: LoadedEngines) -> None:
    """No reranker: the embedding engine, if any, scores pairs by cosine."""
    from worker.embedding.engine import EmbeddingEngine

    for engine in loaded.engines:
        if isinstance(engine, EmbeddingEngine):
            engine.enable_scoring()
            loaded.score = engine.score_info()
            loaded.capabilities += [
                c for c in engine.capabilities() if c not in loaded.capabilities
            ]
            return


def _refuse_text_only_flags(args: argparse.Namespace) -> None:
    """Flags that only an mlx-lm text model honours, refused by name for any other main model
    (they would be silently ignored). `--speculative auto`, the default, is not asked for."""
    asked = getattr(args, "speculative", "none")
    if asked in ("ngram", "draft"):
        raise ValueError(
            f"--speculative {asked}: speculative decoding runs on mlx-lm text models, and "
            f"{args.model} is not one"
        )
    if getattr(args, "chat_template", None) is not None:
        raise ValueError(f"--chat-template: {args.model} is not an mlx-lm chat model")
    if getattr(args, "lora", None):
        raise ValueError(f"--lora (LoRA adapters): {args.model} is not an mlx-lm chat model")


def _add_embedding(loaded: LoadedEngines, path: str, args: argparse.Namespace) -> None:
    from worker.embedding.engine import load_embedding_engine

    engine = load_embedding_engine(path, embedding_settings(args))
    loaded.engines.append(engine)
    loaded.embedding = engine.ready_info()
    loaded.capabilities += [c for c in engine.capabilities() if c not in loaded.capabilities]


def _add_text(loaded: LoadedEngines, args: argparse.Namespace, sharder: Any = None) -> None:
    from worker.text.args import build_text_engine
    from worker.text.features import configure

    setup = build_text_engine(args, sharder)
    configure(args.reasoning_parser, args.tool_call_parser, setup.tokenizer)
    loaded.engines.append(setup.engine)
    loaded.capabilities += list(setup.engine.capabilities())
    loaded.text = setup.engine.ready_info()
    loaded.tokenizer, loaded.model = setup.tokenizer, setup.model
    loaded.closers.append(setup.prefix.close)


def _add_vision(loaded: LoadedEngines, args: argparse.Namespace) -> None:
    from worker.text.features import configure
    from worker.text.prefill_pacing import DEFAULT_RATIO
    from worker.vision.engine import VisionEngine, make_text_prefix_caches
    from worker.vision.features import CountingVisionCache
    from worker.vision.model import load_vision_model
    from worker.vision.turns import ConversationCache

    unsupported = [
        flag
        for flag, value in (
            ("--draft-model", args.draft_model),
            ("--kv-bits", args.kv_bits),
            ("--max-kv-size", args.max_kv_size),
            ("--warm-prompts", args.warm_prompts),
            ("--ssd-cache-dir", args.ssd_cache_dir),
            ("--dtype", None if args.dtype == "auto" else args.dtype),
            ("--lora", args.lora or None),
        )
        if value is not None
    ]
    if unsupported:
        raise ValueError(
            f"{', '.join(unsupported)}: not supported for an mlx-vlm model ({args.model})"
        )
    vm = load_vision_model(args.model)
    configure(args.reasoning_parser, args.tool_call_parser, vm.tokenizer)
    # Half of the prefix-cache budget for text prompts (the batch's prefix cache, else
    # mlx-vlm's APC), half for conversations with images (worker/vision/turns.py).
    apc, text_prefix = make_text_prefix_caches(vm, args.prefix_cache_bytes // 2)
    turns = ConversationCache(args.prefix_cache_bytes // 2)
    cache = CountingVisionCache(args.vision_cache_entries)
    interleave = DEFAULT_RATIO if args.prefill_interleave is None else args.prefill_interleave
    engine = VisionEngine(
        vm, args.prefill_step_size, apc, cache, turns, args.talker_max_frames,
        args.max_num_seqs, text_prefix, interleave=interleave,
    )  # fmt: skip
    loaded.closers.append(text_prefix.close)
    loaded.engines.append(engine)
    loaded.capabilities += engine.capabilities()
    loaded.text = engine.ready_info()
    # No count_tokens / tokenize: a prompt's tokens depend on its images (processor work).
    loaded.model = vm.model


def _add_speech(loaded: LoadedEngines, kind: str, path: str, args: argparse.Namespace) -> None:
    if kind == SPEECH:
        from worker.speech.engine import load_tts_engine

        engine = load_tts_engine(path, voice_cache_bytes=args.voice_cache_bytes)
        loaded.speech = engine.ready_info()
    else:
        from worker.transcription.engine import load_stt_engine

        engine = load_stt_engine(path, args.dtype)  # --dtype float32: Whisper in float32
        loaded.transcription = engine.ready_info()
    loaded.engines.append(engine)
    loaded.capabilities += [c for c in engine.capabilities() if c not in loaded.capabilities]
