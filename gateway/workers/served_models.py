"""Which models a server serves, and which names reach them.

One worker serves the main model (MODEL: chat, or itself a TTS, speech-recognition,
embedding, reranking, image- or video-generation model) and optionally a TTS model (`--speech-model`), a
speech-recognition model (`--transcription-model`), an embedding model (`--embedding-model`), a
reranker (`--rerank-model`), an image model (`--image-model`) and a video model
(`--video-model`). Its Ready message tells them apart by section (`text`, `speech`,
`transcription`, `embedding`, `score`, `image`, `video`, each with its
checkpoint path); sections with the main
model's path are the main model itself. The `score` section of an embedding model that scores
by cosine (no reranker served) has the embedding model's path, so that model is of both kinds. Each
served model is one entry of `/v1/models`, with the capabilities of its own sections.

A request's `model` reaches a served model by, in this order:

1. its id (the main model: `--served-model-name` or the directory name / repo id; the others:
   the TTS model's served name, the speech-recognition checkpoint's directory name) or its
   checkpoint path, exactly;
2. OpenAI's names (`DEFAULT_NAMES`), always on while a model of that kind is served:
   `tts-1`, `tts-1-hd`, `gpt-4o-mini-tts` reach the TTS model, `whisper-1`,
   `gpt-4o-transcribe`, `gpt-4o-mini-transcribe` the speech-recognition model and
   `text-embedding-3-small`, `text-embedding-3-large`, `text-embedding-ada-002` the
   embedding model, `gpt-image-1`, `gpt-image-1-mini`, `dall-e-3`, `dall-e-2` the image model,
   `sora-2`, `sora-2-pro` the video model. OpenAI names
   whose output this server cannot give (`UNSUPPORTED_NAMES`) are refused by name instead;
3. a `--model-alias` glob (`fnmatch`, case-sensitive), which reaches the main model.

A LoRA adapter loaded on the chat model (`--lora-modules`, `/v1/load_lora_adapter`) is a served
model of its own: its name is its id, its `parent` the chat model's id, and a request that
names it runs on the chat model's worker under that adapter.

So an alias never hides an id, and `--model-alias '*'` does not take `tts-1` from the TTS
model. When two models answer to the same name, the one serving the request's kind wins.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase

from gateway.workers.protocol import EngineClient
from protocol.messages import Ready

CHAT, SPEECH, TRANSCRIPTION = "chat", "speech", "transcription"  # what a route needs
EMBEDDING, RERANK, IMAGE, VIDEO = "embedding", "rerank", "image", "video"
KIND_CAPABILITIES = {
    CHAT: ("chat", "complete", "image_in", "audio_in", "video_in"),
    SPEECH: ("speech",),
    TRANSCRIPTION: ("transcribe", "translate"),
    EMBEDDING: ("embed",),
    RERANK: ("rerank", "score"),
    IMAGE: ("image_out", "image_edit"),
    VIDEO: ("video_out",),
}
DEFAULT_NAMES = {
    SPEECH: ("tts-1", "tts-1-hd", "gpt-4o-mini-tts"),
    TRANSCRIPTION: ("whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe"),
    EMBEDDING: ("text-embedding-3-small", "text-embedding-3-large", "text-embedding-ada-002"),
    IMAGE: ("gpt-image-1", "gpt-image-1-mini", "dall-e-3", "dall-e-2"),
    VIDEO: ("sora-2", "sora-2-pro"),
}
UNSUPPORTED_NAMES = {
    "gpt-4o-transcribe-diarize": "speaker diarization (who spoke when) is not available here",
}


class UnsupportedName(Exception):
    """An OpenAI model name this server knows but cannot honour; the text says why."""


@dataclass(frozen=True, slots=True)
class ServedModel:
    id: str
    path: str
    kinds: tuple[
        str, ...
    ]  # CHAT, SPEECH, TRANSCRIPTION, EMBEDDING, RERANK, IMAGE, VIDEO; () until ready
    capabilities: tuple[str, ...]  # Ready's capabilities of these kinds, in Ready's order
    main: bool = False
    other_names: tuple[str, ...] = ()  # also exact: the checkpoint path, the TTS section's name
    aliases: tuple[str, ...] = ()  # OpenAI's names for it (DEFAULT_NAMES)
    alias_patterns: tuple[str, ...] = ()  # --model-alias globs (the main model only)
    max_context: int | None = None  # the chat model's context; an embedding model's input,
    # a reranker's pair
    parent: str | None = None  # a LoRA adapter: the id of the model it adapts

    def answers_to(self, name: str) -> bool:
        return name == self.id or name in self.other_names

    def describe(self) -> str:
        """`id` (kinds; also as aliases), for error messages."""
        text = f"`{self.id}`"
        notes = [", ".join(self.kinds)] if self.kinds else []
        if self.aliases:
            notes.append("also " + ", ".join(self.aliases))
        return f"{text} ({'; '.join(notes)})" if notes else text


@dataclass
class _Group:
    path: str
    kinds: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # own names of its sections


def served_models(engine: EngineClient, alias_patterns: Sequence[str] = ()) -> list[ServedModel]:
    """Every served model, the main model first (only it while no worker is ready)."""
    ready = engine.ready_info
    main_path = _normal(engine.model_path)
    if ready is None:
        return [
            ServedModel(
                engine.model_name,
                engine.model_path,
                (),
                (),
                main=True,
                other_names=_others(engine.model_name, [engine.model_path]),
                alias_patterns=tuple(alias_patterns),
            )
        ]
    capabilities = [str(c) for c in ready.capabilities]
    sections: list[tuple[str, str, str | None]] = []  # (kind, path, own name)
    if ready.text is not None:
        sections.append((CHAT, engine.model_path, None))
    if ready.speech is not None:
        sections.append((SPEECH, ready.speech.model_path, ready.speech.model))
    if ready.transcription is not None:
        sections.append((TRANSCRIPTION, ready.transcription.model_path, None))
    elif "transcribe" in capabilities:
        sections.append((TRANSCRIPTION, engine.model_path, None))
    if ready.embedding is not None:
        sections.append((EMBEDDING, ready.embedding.model_path, None))
    if ready.score is not None:  # a reranker, or the embedding model scoring by cosine
        sections.append((RERANK, ready.score.model_path, None))
    if ready.image is not None:
        sections.append((IMAGE, ready.image.model_path, None))
    if ready.video is not None:
        sections.append((VIDEO, ready.video.model_path, None))
    if sections and all(_normal(path) != main_path for _, path, _ in sections):
        # A speech model served alone under a path the worker spelled its own way.
        kind, path, name = sections[0]
        sections[0] = (kind, engine.model_path, name)
    groups: dict[str, _Group] = {main_path: _Group(engine.model_path)}
    for kind, path, name in sections:
        group = groups.setdefault(_normal(path), _Group(path))
        group.kinds.append(kind)
        group.names += [path] + ([name] if name else [])
    models = []
    for key, group in groups.items():
        main = key == main_path
        if main:
            model_id = engine.model_name
            names = [engine.model_path, *group.names]
        else:
            model_id = next(
                (n for n in group.names if n != group.path), os.path.basename(key) or key
            )
            names = group.names
        wanted = {c for kind in group.kinds for c in KIND_CAPABILITIES[kind]}
        text = ready.text if main and CHAT in group.kinds else None
        embedding = ready.embedding if EMBEDDING in group.kinds else None
        score = ready.score if RERANK in group.kinds else None
        if text is not None:
            max_context = text.max_context
        elif embedding is not None:
            max_context = embedding.max_input_tokens
        else:
            max_context = score.max_input_tokens if score is not None else None
        models.append(
            ServedModel(
                model_id,
                group.path,
                tuple(group.kinds),
                tuple(c for c in capabilities if c in wanted),
                main=main,
                other_names=_others(model_id, names),
                alias_patterns=tuple(alias_patterns) if main else (),
                max_context=max_context,
            )
        )
    models = _with_default_names(models)
    return models + _adapters(models, ready)


def _adapters(models: list[ServedModel], ready: Ready) -> list[ServedModel]:
    """The LoRA adapters loaded on the chat model, each a model of its own (but one whose
    name another model answers to: `serve` refuses that name, so only a path can)."""
    main, text = models[0], ready.text
    if text is None or not text.adapters or CHAT not in main.kinds:
        return []
    taken = {name for m in models for name in (m.id, *m.other_names, *m.aliases)}
    return [
        ServedModel(
            adapter.name,
            adapter.path,
            (CHAT,),
            tuple(c for c in main.capabilities if c in KIND_CAPABILITIES[CHAT]),
            max_context=main.max_context,
            parent=main.id,
        )
        for adapter in text.adapters
        if adapter.name not in taken
    ]


def lookup(models: Sequence[ServedModel], name: str, kind: str | None) -> ServedModel | None:
    """The model `name` reaches (by the order of the module docstring), preferring one that
    serves `kind`; None when none does. Raises UnsupportedName for UNSUPPORTED_NAMES."""
    found = _pick([m for m in models if m.answers_to(name)], kind)
    if found is None and name in UNSUPPORTED_NAMES:
        raise UnsupportedName(UNSUPPORTED_NAMES[name])
    if found is None:
        found = _pick([m for m in models if name in m.aliases], kind)
    if found is None:
        patterns = [m for m in models if any(fnmatchcase(name, p) for p in m.alias_patterns)]
        found = _pick(patterns, kind)
    return found


def serving(models: Sequence[ServedModel], kind: str) -> ServedModel | None:
    """The model that serves `kind`, if any."""
    return next((m for m in models if kind in m.kinds), None)


def _pick(candidates: list[ServedModel], kind: str | None) -> ServedModel | None:
    if not candidates:
        return None
    return next((m for m in candidates if kind in m.kinds), candidates[0])


def _with_default_names(models: list[ServedModel]) -> list[ServedModel]:
    out = []
    taken: set[str] = set()
    for model in models:
        aliases = [
            name
            for kind in model.kinds
            for name in DEFAULT_NAMES.get(kind, ())
            if kind not in taken and not any(m.answers_to(name) for m in models)
        ]
        taken.update(model.kinds)
        out.append(replace(model, aliases=tuple(aliases)))
    return out


def _others(model_id: str, names: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for n in names if n and n != model_id))


def _normal(path: str) -> str:
    return os.path.normpath(os.path.expanduser(str(path))) if path else ""
