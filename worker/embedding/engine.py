"""The embedding engine: every waiting input of every request shares forward passes.

`admit` tokenizes and checks a request's inputs (worker/embedding/inputs.py) and queues each
input; `step` runs ONE padded forward pass over the inputs the planner picks
(worker/embedding/batching.py: length buckets under `--embedding-batch-tokens`, the oldest
input always included), so the scheduler interleaves embedding passes with the text engine's
decode steps and a large request never stalls chat for more than one pass. A request ends
when its last input is embedded: its terminal Delta (finish_reason "stop") carries one vector
per input, in input order, as little-endian float32 bytes. Usage: prompt_tokens = the tokens
embedded (special tokens included), completion_tokens = 0.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

import mlx.core as mx
import numpy as np

from protocol.inputs import EmbedInputs, Op
from protocol.messages import Delta, FinishReason, Submit, Usage
from protocol.ready import Capability, EmbeddingInfo
from worker.embedding.args import EmbeddingSettings
from worker.embedding.batching import Pending, plan_pass
from worker.embedding.inputs import Limits, tokenize
from worker.embedding.models import EmbeddingModel
from worker.runtime.errors import RequestError, bad_request

log = logging.getLogger(__name__)


@dataclass
class _Job:
    rows: list[list[int]]
    dimensions: int | None
    vectors: list[bytes | None] = field(default_factory=list)
    left: int = 0

    @property
    def tokens(self) -> int:
        return sum(len(r) for r in self.rows)


class EmbeddingEngine:
    ops = frozenset({Op.EMBED})

    def __init__(self, model: EmbeddingModel, settings: EmbeddingSettings) -> None:
        self.model = model
        self.settings = settings
        checkpoint = model.checkpoint
        self.limits = Limits(
            max_input_tokens=checkpoint.max_input_tokens,
            max_inputs=settings.max_inputs,
            max_total_tokens=settings.max_total_tokens,
            vocab_size=checkpoint.vocab_size,
        )
        self._jobs: dict[str, _Job] = {}
        self._pending: deque[Pending] = deque()  # key: (request id, input index), oldest first
        self.passes = 0  # forward passes run (tests read it)

    def admit(self, submit: Submit) -> Delta:
        inputs = submit.inputs
        assert isinstance(inputs, EmbedInputs)
        try:
            dimensions = self._dimensions(inputs.dimensions)
            rows = tokenize(inputs, self.model.tokenizer, self.limits)
        except RequestError as exc:
            return Delta(
                submit.request_id, finish_reason=FinishReason.ERROR, usage=Usage(0, 0),
                error=exc.info(),
            )  # fmt: skip
        self._jobs[submit.request_id] = _Job(rows, dimensions, [None] * len(rows), len(rows))
        self._pending.extend(Pending((submit.request_id, i), len(r)) for i, r in enumerate(rows))
        return Delta(submit.request_id)

    def step(self) -> list[Delta]:
        chosen = plan_pass(self._pending, self.settings.batch_tokens, self.settings.batch_rows)
        if not chosen:
            return []
        rows = [self._jobs[rid].rows[i] for rid, i in (p.key for p in chosen)]
        vectors = self.model.embed(rows)
        mx.eval(vectors)
        self.passes += 1
        values = np.array(vectors, dtype=np.float32)
        taken = {p.key for p in chosen}
        self._pending = deque(p for p in self._pending if p.key not in taken)
        done: list[Delta] = []
        for (request_id, index), vector in zip((p.key for p in chosen), values, strict=True):
            job = self._jobs[request_id]
            job.vectors[index] = self._encode(vector, job.dimensions)
            job.left -= 1
            if job.left == 0:
                del self._jobs[request_id]
                done.append(
                    Delta(
                        request_id,
                        finish_reason=FinishReason.STOP,
                        usage=Usage(job.tokens, 0),
                        embeddings=list(job.vectors),  # type: ignore[arg-type]
                    )
                )
        return done

    def abort(self, request_ids: Iterable[str]) -> list[Delta]:
        ended = []
        for request_id in request_ids:
            job = self._jobs.pop(request_id, None)
            if job is not None:
                ended.append(
                    Delta(request_id, finish_reason=FinishReason.ABORT, usage=Usage(job.tokens, 0))
                )
        if ended:
            gone = {d.request_id for d in ended}
            self._pending = deque(p for p in self._pending if p.key[0] not in gone)
        return ended

    def active_ids(self) -> list[str]:
        return list(self._jobs)

    def capabilities(self) -> list[Capability]:
        return [Capability.EMBED]

    def ready_info(self) -> EmbeddingInfo:
        checkpoint = self.model.checkpoint
        return EmbeddingInfo(
            model_path=checkpoint.path,
            backend=checkpoint.backend,
            model_type=checkpoint.model_type,
            dimensions=self.model.dimensions,
            pooling=checkpoint.pooling,
            normalize=checkpoint.normalize,
            max_input_tokens=checkpoint.max_input_tokens,
            max_inputs=self.settings.max_inputs,
            max_total_tokens=self.settings.max_total_tokens,
            matryoshka=checkpoint.matryoshka,
            matryoshka_dimensions=list(checkpoint.matryoshka_dimensions),
        )

    def _dimensions(self, wanted: int | None) -> int | None:
        """`dimensions` checked against what the model was trained for; None: the full vector."""
        full = self.model.dimensions
        if wanted is None or wanted == full:
            return None
        checkpoint = self.model.checkpoint
        if not checkpoint.matryoshka:
            raise bad_request(
                f"`dimensions`: this model makes {full}-dimensional vectors and was not "
                "trained for shorter ones (no Matryoshka representation in its config)"
            )
        allowed = checkpoint.matryoshka_dimensions
        if not 1 <= wanted <= full or (allowed and wanted not in allowed):
            sizes = ", ".join(map(str, allowed)) if allowed else f"1 to {full}"
            raise bad_request(f"`dimensions` {wanted}: this model takes {sizes}")
        return wanted

    def _encode(self, vector: np.ndarray, dimensions: int | None) -> bytes:
        if dimensions is not None:
            vector = vector[:dimensions]
            if self.model.checkpoint.normalize:
                vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
        return vector.astype("<f4").tobytes()


def load_embedding_engine(path: str, settings: EmbeddingSettings) -> EmbeddingEngine:
    from worker.embedding.models import load_embedding_model

    model = load_embedding_model(path)
    log.info(
        "embedding model %s: %s, %s pooling%s, %d dimensions, inputs up to %d tokens",
        path, model.checkpoint.backend, model.checkpoint.pooling,
        " + normalize" if model.checkpoint.normalize else "", model.dimensions,
        model.checkpoint.max_input_tokens,
    )  # fmt: skip
    return EmbeddingEngine(model, settings)
