"""mlx-lm's `BatchGenerator` with the prefill chunk inside the decode step's forward pass.

Upstream, one `next()` is a decode step for the generating requests (one model call), then one
prefill chunk for the requests still prefilling (a second call, evaluated synchronously). Here,
when both have work and the chunk's rows are all the same length, the chunk joins the decode
step's model call (worker/text/fused_forward.py): one pass reads the weights once for both, and
the chunk's cache is started with the decode step's own `async_eval`. (So the step ends before
its chunk is computed on a backend that runs graphs asynchronously; the batch engine waits for
it at the end of a paced step, so that the pacer times each step's own chunk.) The step's
bookkeeping is upstream's, in a different order: requests are admitted and finished prompts
move to the generation batch first, then the chunks are cut, then the (fused) decode step runs;
so a request whose prefill completes decodes its first token in that same call, one call
earlier than upstream.

Everything else is upstream's `next()`: nothing generating, nothing prefilling, chunks of
different lengths (they need right padding), a model `fused_forward.fusable` rejects, or an
mlx-lm without the internals this relies on (`_INTERNALS`). `fuse=False` turns fusion off. A
prompt's last token still runs as upstream runs it: the first step of its generation batch.

With a speculator, the generation batch verifies proposed tokens (worker/text/speculation/): its
decode rows are then 1 + K tokens wide, and the chunk rides in that pass just the same.

With LoRA adapters (worker/text/adapters/), every model call is built under its rows' adapters:
the decode step under the generation batch's, a prefill chunk under the prompt batch's, the first
step of requests whose prefill completes under theirs. While a request with an adapter is in the
generator, its steps run upstream's order in three calls (decode, admission, chunk: `_routed_next`),
unfused, since the fused pass lays every row out as one sequence. A `rows` context (a vision
model's per-row mRoPE positions, worker/vision/batched.py) is entered the same way, around every
model call, and routes every step.

The fused call relies on upstream's decode step calling its model exactly once. If an mlx-lm
release ever does otherwise, the step raises `FusionError` (its chunk was cut but not fed, so
the requests in it cannot go on) and the batch engine turns fusion off for good.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import mlx.core as mx
from mlx_lm.generate import BatchGenerator, PromptProcessingBatch

from worker.text.adapters.registry import BASE, Adapters
from worker.text.fused_forward import fusable, fused_logits
from worker.text.speculation.generation_batch import SpeculativeGenerationBatch
from worker.text.speculation.speculator import Speculator

CLEAR_EVERY = 512  # decode steps between two mx.clear_cache(), as upstream
_INTERNALS = (
    "_generation_batch",
    "_prompt_batch",
    "_unprocessed_sequences",
    "_currently_processing",
    "_counters",
    "_make_batch",
)


class FusionError(RuntimeError):
    """The decode step did not call the model exactly once with the chunk (see the docstring)."""


def _supported(generator: BatchGenerator) -> bool:
    return all(hasattr(generator, name) for name in _INTERNALS)


class FusedBatchGenerator(BatchGenerator):
    """A BatchGenerator whose decode steps carry the prefill chunk; see the module docstring."""

    def __init__(
        self,
        model: Any,
        *,
        fuse: bool = True,
        speculator: Speculator | None = None,
        adapters: Adapters | None = None,
        slot_of: Callable[[int], int] = lambda uid: BASE,
        rows: Callable[[list[int]], AbstractContextManager[None]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        self.fuse = fuse and fusable(model) and _supported(self)
        self._adapters = adapters
        self._slot_of = slot_of  # a request's adapter slot, by its uid
        # What every model call is built under, given its rows' uids (a vision model's
        # per-row positions: worker/vision/batched.py); with it, every step is routed.
        self._row_context = rows
        self.fused_tokens = 0  # prompt tokens prefilled inside decode steps
        if speculator is not None:
            # The one generation batch of this generator (requests join it by `extend`) is one
            # that verifies proposals (worker/text/speculation/generation_batch.py).
            batch = SpeculativeGenerationBatch.empty(self.model, self.sampler)
            batch.speculator = speculator
            self._generation_batch = batch

    def _next(self):
        generation = self._generation_batch
        if self._adapted():
            return self._routed_next()
        if (
            not self.fuse
            or len(generation) == 0
            or len(generation) >= self.completion_batch_size
            or not (self._currently_processing or self._unprocessed_sequences)
        ):
            return super()._next()
        prompt_responses = self._admit()
        chunks = self._cut_chunks(prompt_responses)
        widths = {len(c) for c in chunks}
        if len(widths) == 1 and 0 not in widths:
            return prompt_responses, self._decode(chunks)
        responses = self._decode(None)
        self._prompt(chunks)
        return prompt_responses, responses

    @property
    def routable(self) -> bool:
        """Whether its model calls can run each row under its own adapter (`_routed_next`)."""
        return _supported(self)

    def _adapted(self) -> bool:
        """Whether a request in the generator uses an adapter (or every model call needs to
        know its rows)."""
        if self._row_context is not None and self.routable:
            return True
        if self._adapters is None or not self._adapters.weighted or not self.routable:
            return False
        queued = (sequence[0] for sequence in self._unprocessed_sequences)
        uids = (*self._generation_batch.uids, *self._prompt_batch.uids, *queued)
        return any(self._slot_of(uid) != BASE for uid in uids)

    def _routed_next(self):
        """Upstream's `_next` (a decode step, admission, a prefill chunk), each model call
        under its rows' adapters."""
        responses = self._decode(None) if len(self._generation_batch) else []
        if len(self._generation_batch) >= self.completion_batch_size:
            return [], responses
        prompt_responses = self._admit()
        self._prompt(self._cut_chunks(prompt_responses))
        return prompt_responses, responses

    def _rows(self, uids: list[int]) -> AbstractContextManager[Any]:
        """Model calls built inside run row i under the adapter of request `uids[i]` (and
        the row context's)."""
        stack = contextlib.ExitStack()
        if self._row_context is not None:
            stack.enter_context(self._row_context(uids))
        if self._adapters is not None and self._adapters.weighted:
            stack.enter_context(self._adapters.selecting([self._slot_of(uid) for uid in uids]))
        return stack

    def _admit(self) -> list[Any]:
        """Upstream's admission: queued requests join the prompt batch, and those with only
        their last token left move to the generation batch (which starts their first step)."""
        room = min(
            self.prefill_batch_size - len(self._prompt_batch),
            self.completion_batch_size - len(self._generation_batch),
            len(self._unprocessed_sequences),
        )
        if room > 0:
            self._prompt_batch.extend(self._make_batch(room))
        done = [
            i
            for i, (segments, _, _) in enumerate(self._currently_processing)
            if len(segments) == 1 and len(segments[0]) == 1
        ]
        if not done:
            return []
        finished = [self._currently_processing[i] for i in done]
        gone = set(done)
        self._currently_processing = [
            p for i, p in enumerate(self._currently_processing) if i not in gone
        ]
        with self._rows([self._prompt_batch.uids[i] for i in done]):
            batch = self._prompt_batch.split(done).generate([p[0][0] for p in finished])
        self._generation_batch.extend(batch)
        return [
            PromptProcessingBatch.Response(uid, (p[2], p[2]), True, True)
            for uid, p in zip(batch.uids, finished, strict=True)
        ]

    def _cut_chunks(self, responses: list[Any]) -> list[list[int]]:
        """Upstream's chunking: each prefilling request's next prefill_step_size tokens (at most
        up to the end of its segment), with a progress response for each."""
        chunks = []
        for uid, progress in zip(self._prompt_batch.uids, self._currently_processing, strict=True):
            segments = progress[0]
            chunk = segments[0][: self.prefill_step_size]
            segments[0] = segments[0][len(chunk) :]
            end_of_segment = not segments[0]
            if end_of_segment:
                segments.pop(0)
            progress[1] += len(chunk)
            responses.append(
                PromptProcessingBatch.Response(
                    uid, (progress[1], progress[2]), end_of_segment, False
                )
            )
            chunks.append(chunk)
        return chunks

    def _decode(self, chunks: list[list[int]] | None) -> list[Any]:
        """One decode step, carrying `chunks` in its forward pass when given."""
        generation = self._generation_batch
        model = generation.model
        fused = None if chunks is None else _FusedCall(model, chunks, self._prompt_batch)
        if fused is not None:
            generation.model = fused
        tic = time.perf_counter()
        try:
            with self._rows(generation.uids):
                responses = generation.next()
        finally:
            generation.model = model
        if fused is not None and fused.calls != 1:
            raise FusionError(
                f"mlx-lm's decode step called the model {fused.calls} times with a prefill "
                "chunk, not once: this mlx-lm's GenerationBatch is not the one "
                "worker/text/fused_generator.py was written for"
            )
        self._counters.decode_time += time.perf_counter() - tic
        self._counters.generation_tokens += len(responses)
        self._counters.generation_steps += 1
        if chunks is not None:
            tokens = sum(len(c) for c in chunks)
            self._counters.prompt_tokens += tokens
            self.fused_tokens += tokens
        if self._counters.generation_steps % CLEAR_EVERY == 0:
            mx.clear_cache()
        return responses

    def _prompt(self, chunks: list[list[int]]) -> None:
        if not chunks:
            return
        self._counters.prompt_tokens += sum(len(c) for c in chunks)
        tic = time.perf_counter()
        with self._rows(self._prompt_batch.uids):
            self._prompt_batch.prompt(chunks)
        self._counters.prompt_time += time.perf_counter() - tic


class _FusedCall:
    """Stands in for the model in one decode step: the decode rows' logits, with the prompt
    batch's chunk fed into its cache in the same pass (its state is evaluated with them)."""

    def __init__(self, model: Any, chunks: list[list[int]], prompts: Any) -> None:
        self._model = model
        self._chunks = chunks
        self._prompts = prompts
        self.calls = 0

    def __call__(self, inputs: mx.array, cache: list[Any]) -> mx.array:
        self.calls += 1
        if self.calls > 1:  # the chunk is in the cache already: never feed it twice
            return self._model(inputs, cache=cache)
        for tokens, chunk in zip(self._prompts.tokens, self._chunks, strict=True):
            tokens += chunk  # the prompt batch's record of what its cache holds
        chunk_cache = self._prompts.prompt_cache
        logits = fused_logits(self._model, inputs, cache, mx.array(self._chunks), chunk_cache)
        # The decode step evaluates its logits; the chunk's cache is evaluated beside them.
        mx.async_eval([c.state for c in chunk_cache])
        return logits
