"""The `model_name` label: the served model's id (what `/v1/models` lists) that does the work.

A chat request is labelled with the chat model, a speech request with the TTS model, and so on
(gateway/workers/served_models.py decides which model serves which kind); engine-wide metrics
(worker state, restarts, the admission queue) with the main model. The answer is cached until
the worker's Ready or the main model's name changes (a restart, a swap).
"""

from __future__ import annotations

from typing import Any

from gateway.workers.served_models import (
    CHAT,
    EMBEDDING,
    RERANK,
    SPEECH,
    TRANSCRIPTION,
    served_models,
    serving,
)

KIND_OF_OP = {
    "chat": CHAT,
    "complete": CHAT,
    "speech": SPEECH,
    "transcribe": TRANSCRIPTION,
    "embed": EMBEDDING,
    "score": RERANK,
}


class ModelNames:
    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._ready: Any = None  # the Ready and main name the cache is for (held, so that
        self._name: str | None = None  # the identity check cannot match a newer Ready)
        self._by_kind: dict[str, str | None] = {}

    def main(self) -> str:
        return self._engine.model_name

    def for_kind(self, kind: str) -> str | None:
        """The id of the model serving `kind`; None when none does."""
        engine = self._engine
        ready, main = engine.ready_info, engine.model_name
        if ready is not self._ready or main != self._name:
            self._ready, self._name, self._by_kind = ready, main, {}
        if kind not in self._by_kind:
            try:
                model = serving(served_models(engine), kind)
            except Exception:  # a partial stand-in engine
                model = None
            self._by_kind[kind] = model.id if model is not None else None
        return self._by_kind[kind]

    def for_op(self, op: str) -> str:
        """The model a request of operation `op` is labelled with (the main model when no
        served model has its kind: such a request fails, but is counted all the same)."""
        kind = KIND_OF_OP.get(op)
        return (self.for_kind(kind) if kind is not None else None) or self.main()
