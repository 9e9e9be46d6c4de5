"""Which engines a worker runs, and loading them: the main model plus optional speech models.

The main `--model` is classified from its config.json the way mlx-audio classifies checkpoints:
a speech-recognition model gets the speech-in engine, a TTS model the speech-out engine, and
anything else the text engine (mlx-lm). `--tts-model` / `--asr-model` add a speech engine next
to the main one, in the same worker and on the same MLX thread. `--omni` insists that the main
model is a speech model (a clear error otherwise). Everything here runs on the MLX thread.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TEXT, SPEECH_OUT, SPEECH_IN = "text", "tts", "stt"
_EXTRA = {SPEECH_OUT: "tts", SPEECH_IN: "audio"}


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--tts-model", help="a TTS checkpoint served next to the main model (speech out)")
    add("--asr-model", help="a speech-recognition checkpoint served next to it (speech in)")
    add("--omni", action="store_true", help="the main model is a speech model")
    add("--reasoning-parser", default="auto", help="auto | none | qwen3 | deepseek_r1")
    add("--tool-call-parser", default="auto", help="auto | none | a format name")


def model_kind(path: str) -> str:
    """TEXT, SPEECH_OUT or SPEECH_IN, from the checkpoint's config.json."""
    try:
        from mlx_audio.registry import classify_model
    except ImportError:  # no speech extra installed: only text models are servable
        return TEXT
    from worker.stt_family import read_model_type

    kind = classify_model(read_model_type(path), Path(path).name)
    return kind if kind in (SPEECH_OUT, SPEECH_IN) else TEXT


@dataclass
class LoadedEngines:
    engines: list[Any]  # worker.engine_api.Engine, the main model's first
    capabilities: list[str]
    limits: dict[str, Any]
    audio: dict[str, Any]
    tokenizer: Any = None  # the text model's, for count_tokens (None without a text model)
    model: Any = None  # the text model's nn.Module, for mlx-lm's wired_limit
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        for close in self.closers:
            close()


def load_engines(args: argparse.Namespace) -> LoadedEngines:
    """Loads every engine the arguments ask for (raises on any failure: the caller sends Fatal)."""
    kind = model_kind(args.model)
    if args.omni and kind == TEXT:
        raise ValueError(f"--omni: {args.model} is not a speech (TTS or speech-recognition) model")
    loaded = LoadedEngines(engines=[], capabilities=[], limits={}, audio={})
    if kind == TEXT:
        _add_text(loaded, args)
    else:
        _add_speech(loaded, kind, args.model)
    for extra_kind, path in ((SPEECH_OUT, args.tts_model), (SPEECH_IN, args.asr_model)):
        if path:
            found = model_kind(path)
            if found != extra_kind:
                raise ValueError(
                    f"--{'tts' if extra_kind == SPEECH_OUT else 'asr'}-model {path} is not a "
                    f"{'TTS' if extra_kind == SPEECH_OUT else 'speech-recognition'} checkpoint "
                    f"(install the [{_EXTRA[extra_kind]}] extra if it is one)"
                )
            _add_speech(loaded, extra_kind, path)
    return loaded


def _add_text(loaded: LoadedEngines, args: argparse.Namespace) -> None:
    from worker.generation_args import build_text_engine
    from worker.request_features import configure

    setup = build_text_engine(args)
    configure(args.reasoning_parser, args.tool_call_parser, setup.tokenizer)
    loaded.engines.append(setup.engine)
    loaded.capabilities += list(setup.engine.capabilities())
    loaded.limits.update(setup.engine.ready_info())
    loaded.tokenizer, loaded.model = setup.tokenizer, setup.model
    loaded.closers.append(setup.prefix.close)


def _add_speech(loaded: LoadedEngines, kind: str, path: str) -> None:
    if kind == SPEECH_OUT:
        from worker.tts_engine import load_tts_engine

        engine = load_tts_engine(path)
        loaded.audio.update(engine.ready_info())
    else:
        from worker.stt_engine import load_stt_engine

        engine = load_stt_engine(path)
        loaded.limits.update(engine.ready_info())
    loaded.engines.append(engine)
    loaded.capabilities += [c for c in engine.capabilities() if c not in loaded.capabilities]
