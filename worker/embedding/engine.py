"""The embedding and reranking engines: every waiting row of every request shares forward passes.

`admit` tokenizes and checks a request (worker/embedding/inputs.py) and queues its rows (an
input's tokens, or a (query, document) pair's); `step` runs ONE padded forward pass over the
rows the planner picks (worker/embedding/batching.py: length buckets under
`--embedding-batch-tokens`, the oldest row always included), so the scheduler interleaves
these passes with the text engine's decode steps and a large request never stalls chat for
more than one pass. A request ends when its last row has been through a pass.

- EmbeddingEngine (Op.EMBED): the terminal Delta (finish_reason "stop") carries one vector per
  input, in input order, as little-endian float32 bytes. With `scoring` (no reranker served)
  it also takes Op.SCORE: the query and the documents are embedded like any input, in the same
  passes, and each score is the cosine of the query's and the document's vectors.
- RerankEngine (Op.SCORE): a cross-encoder or an LLM reranker (worker/embedding/rerankers.py);
  each pair is one row and gives one score.

A score request's terminal Delta carries `scores`, one per document in order. Usage:
prompt_tokens = the tokens that went through the model (special tokens and the reranker's
template included), completion_tokens = 0.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import mlx.core as mx
import numpy as np

from protocol.inputs import EmbedInputs, Op, ScoreInputs
from protocol.messages import Delta, FinishReason, Submit, Usage
from protocol.ready import Capability, EmbeddingInfo, ScoreInfo
from worker.embedding.args import EmbeddingSettings
from worker.embedding.batching import Pending, plan_pass
from worker.embedding.checkpoint import EMBEDDING_COSINE
from worker.embedding.inputs import (
    Limits,
    check_pairs,
    check_rows,
    check_total,
    encode_texts,
    tokenize,
)
from worker.embedding.models import EmbeddingModel
from worker.embedding.rerankers import RerankModel
from worker.runtime.errors import RequestError, bad_request
from worker.text.prompt_size import longest_token_bytes

log = logging.getLogger(__name__)

Rows = list[list[int]]


@dataclass
class _Job:
    rows: Rows
    finish: Callable[[list[np.ndarray]], Delta]  # the terminal Delta from the rows' outputs
    types: Rows | None = None  # token types per row (a cross-encoder's pairs)
    outputs: list[np.ndarray | None] = field(default_factory=list)
    left: int = 0

    @property
    def tokens(self) -> int:
        return sum(len(r) for r in self.rows)


class _PassEngine:
    """Rows of admitted requests waiting for passes; one pass per `step`."""

    ops: frozenset[Op] = frozenset()

    def __init__(self, settings: EmbeddingSettings) -> None:
        self.settings = settings
        self._jobs: dict[str, _Job] = {}
        self._pending: deque[Pending] = deque()  # key: (request id, row index), oldest first
        self.passes = 0  # forward passes run (tests read it)

    def _forward(self, rows: Rows, types: Rows | None) -> mx.array:
        """(len(rows), n) float32 outputs of one pass."""
        raise NotImplementedError

    def _queue(self, request_id: str, job: _Job) -> Delta:
        job.outputs, job.left = [None] * len(job.rows), len(job.rows)
        self._jobs[request_id] = job
        self._pending.extend(Pending((request_id, i), len(r)) for i, r in enumerate(job.rows))
        return Delta(request_id)

    @staticmethod
    def _refused(request_id: str, exc: RequestError) -> Delta:
        return Delta(
            request_id, finish_reason=FinishReason.ERROR, usage=Usage(0, 0), error=exc.info()
        )

    def step(self) -> list[Delta]:
        chosen = plan_pass(self._pending, self.settings.batch_tokens, self.settings.batch_rows)
        if not chosen:
            return []
        keys = [p.key for p in chosen]
        rows = [self._jobs[rid].rows[i] for rid, i in keys]
        types = None
        if any(self._jobs[rid].types is not None for rid, _ in keys):
            types = [self._row_types(rid, i) for rid, i in keys]
        outputs = self._forward(rows, types)
        mx.eval(outputs)
        self.passes += 1
        values = np.array(outputs, dtype=np.float32)
        taken = set(keys)
        self._pending = deque(p for p in self._pending if p.key not in taken)
        done: list[Delta] = []
        for (request_id, index), value in zip(keys, values, strict=True):
            job = self._jobs[request_id]
            job.outputs[index] = value
            job.left -= 1
            if job.left == 0:
                del self._jobs[request_id]
                done.append(job.finish(job.outputs))  # type: ignore[arg-type]
        return done

    def _row_types(self, request_id: str, index: int) -> list[int]:
        job = self._jobs[request_id]
        return job.types[index] if job.types is not None else [0] * len(job.rows[index])

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


def _scored(request_id: str, scores: Iterable[float], tokens: int) -> Delta:
    return Delta(
        request_id, finish_reason=FinishReason.STOP, usage=Usage(tokens, 0),
        scores=[float(s) for s in scores],
    )  # fmt: skip


class EmbeddingEngine(_PassEngine):
    def __init__(
        self, model: EmbeddingModel, settings: EmbeddingSettings, scoring: bool = False
    ) -> None:
        super().__init__(settings)
        self.model = model
        self.enable_scoring(scoring)
        checkpoint = model.checkpoint
        self.limits = Limits(
            max_input_tokens=checkpoint.max_input_tokens,
            max_inputs=settings.max_inputs,
            max_total_tokens=settings.max_total_tokens,
            vocab_size=checkpoint.vocab_size,
            longest_token=longest_token_bytes(model.tokenizer),
        )

    def enable_scoring(self, on: bool = True) -> None:
        """Score pairs by the cosine of their vectors (Op.SCORE): for when no reranker is served."""
        self.scoring = on
        self.ops = frozenset({Op.EMBED, Op.SCORE} if on else {Op.EMBED})

    def _forward(self, rows: Rows, types: Rows | None) -> mx.array:
        return self.model.embed(rows)

    def admit(self, submit: Submit) -> Delta:
        inputs = submit.inputs
        try:
            if isinstance(inputs, ScoreInputs):
                return self._admit_score(submit.request_id, inputs)
            assert isinstance(inputs, EmbedInputs)
            dimensions = self._dimensions(inputs.dimensions)
            rows = tokenize(inputs, self.model.tokenizer, self.limits)
        except RequestError as exc:
            return self._refused(submit.request_id, exc)
        request_id = submit.request_id

        def finish(outputs: list[np.ndarray]) -> Delta:
            return Delta(
                request_id, finish_reason=FinishReason.STOP, usage=Usage(job.tokens, 0),
                embeddings=[self._encode(v, dimensions) for v in outputs],
            )  # fmt: skip

        job = _Job(rows, finish)
        return self._queue(request_id, job)

    def _admit_score(self, request_id: str, inputs: ScoreInputs) -> Delta:
        """The embedding fallback: the queries (each once) and the documents as inputs."""
        pairs = check_pairs(inputs, self.limits)
        queries = list(dict.fromkeys(q for q, _ in pairs))
        longest = self.limits.max_input_tokens
        texts = queries + [d for _, d in pairs]
        rows = encode_texts(texts, self.model.tokenizer, inputs.truncate, longest)
        n = len(queries)
        check_rows(rows, self.limits, lambda i: "query" if i < n else f"documents[{i - n}]")
        check_total(rows, self.limits, "documents")
        at = {q: i for i, q in enumerate(queries)}
        asked = [at[q] for q, _ in pairs]

        def finish(outputs: list[np.ndarray]) -> Delta:
            vectors = np.stack(outputs)
            vectors /= np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)
            scores = [float(vectors[q] @ vectors[n + d]) for d, q in enumerate(asked)]
            return _scored(request_id, scores, job.tokens)

        job = _Job(rows, finish)
        return self._queue(request_id, job)

    def capabilities(self) -> list[Capability]:
        return (
            [Capability.EMBED, Capability.RERANK, Capability.SCORE]
            if self.scoring
            else [Capability.EMBED]
        )

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

    def score_info(self) -> ScoreInfo | None:
        """The embedding fallback's ScoreInfo (None when it does not score)."""
        if not self.scoring:
            return None
        checkpoint = self.model.checkpoint
        return ScoreInfo(
            checkpoint.path, EMBEDDING_COSINE, checkpoint.model_type,
            checkpoint.max_input_tokens, self.settings.max_inputs, self.settings.max_total_tokens,
        )  # fmt: skip

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


class RerankEngine(_PassEngine):
    ops = frozenset({Op.SCORE})

    def __init__(self, model: RerankModel, settings: EmbeddingSettings) -> None:
        super().__init__(settings)
        self.model = model
        self.limits = Limits(
            max_input_tokens=model.checkpoint.max_input_tokens,
            max_inputs=settings.max_inputs,
            max_total_tokens=settings.max_total_tokens,
            vocab_size=0,
            longest_token=longest_token_bytes(model.tokenizer),
        )

    def _forward(self, rows: Rows, types: Rows | None) -> mx.array:
        return self.model.score(rows, types)

    def admit(self, submit: Submit) -> Delta:
        inputs = submit.inputs
        assert isinstance(inputs, ScoreInputs)
        request_id = submit.request_id
        try:
            pairs = check_pairs(inputs, self.limits)
            rows, types = self.model.pair_rows(pairs, inputs.truncate)
            check_rows(rows, self.limits, lambda i: f"documents[{i}]")
            check_total(rows, self.limits, "documents")
        except RequestError as exc:
            return self._refused(request_id, exc)

        def finish(outputs: list[np.ndarray]) -> Delta:
            return _scored(request_id, (o[0] for o in outputs), job.tokens)

        job = _Job(rows, finish, types)
        return self._queue(request_id, job)

    def capabilities(self) -> list[Capability]:
        return [Capability.RERANK, Capability.SCORE]

    def ready_info(self) -> ScoreInfo:
        checkpoint = self.model.checkpoint
        return ScoreInfo(
            checkpoint.path, checkpoint.method, checkpoint.model_type,
            checkpoint.max_input_tokens, self.settings.max_inputs, self.settings.max_total_tokens,
        )  # fmt: skip


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


def load_rerank_engine(
    path: str, settings: EmbeddingSettings, method: str | None = None
) -> RerankEngine:
    from worker.embedding.rerankers import load_reranker

    model = load_reranker(path, method)
    checkpoint = model.checkpoint
    log.info(
        "reranker %s: %s (%s), pairs up to %d tokens%s", path, checkpoint.method,
        checkpoint.model_type, checkpoint.max_input_tokens,
        f", {checkpoint.activation} of the logit" if checkpoint.method == "cross-encoder" else "",
    )  # fmt: skip
    return RerankEngine(model, settings)
