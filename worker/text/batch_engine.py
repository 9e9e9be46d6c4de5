"""Continuous batching for text on mlx-lm's `BatchGenerator`: the default text engine.

Requests join (`admit`) and leave (`abort`, their end) between steps. One `step` is one
`BatchGenerator.next()`: one decode step for every request that is generating and one prefill
chunk for every request that is still prefilling, so a long prompt's prefill is interleaved
with the other streams' tokens and aborts apply between chunks. A chunk is `prefill_step_size`
tokens while nothing decodes; beside decoding streams the pacer (worker/text/prefill_pacing.py)
makes it as small as keeps their inter-token latency within its budget, and the chunk rides in
the decode step's own forward pass (worker/text/fused_generator.py). Each request keeps its own
sampler (worker/text/sampling.py: a seeded request draws from its own PRNG key whatever else is
in the batch), logits processors, max_tokens and stop conditions: BatchGenerator calls a
request's sampler and processors on that request's row only, and shares one call only between
requests that use the very same sampler object (greedy). EOS tokens are the generator's stop
sequences; stop strings, the parser and logprobs are each request's own
(worker/text/request.py). A request whose prefill ran elsewhere (a vision request's, on
mlx-vlm's own path: worker/vision/batched.py) can `join` with the KV cache it filled.

With speculation (worker/text/speculation/) a step may return several tokens of one request:
each goes through the request's own end rules in order, the tokens after its end are dropped,
and one step's deltas of a request are merged into one where that keeps their order
(`merge_step_deltas`), so a step stays one delta per request (vLLM's inter-token latency is per
engine step). A finished request's cache goes to the prefix cache cut to the tokens it returned
(or to the engine's `KvKeeper`, a vision model's conversation states).

Request-scoped failures stay request-scoped: a logits processor that raises marks only its
request (the step goes on with its logits unchanged, then the request ends with an error);
anything else that breaks a step ends every request in the batch with an internal error and
starts a fresh generator.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import mlx.core as mx
from mlx_lm.generate import StopSequences

from protocol.inputs import Op
from protocol.messages import Delta, FinishReason, Submit
from protocol.ready import Capability, TextInfo
from worker.runtime.errors import RequestError, internal
from worker.runtime.request_log import named, note
from worker.text.adapters.control import loaded
from worker.text.adapters.registry import BASE, Adapters, slot_for
from worker.text.delta_merge import merge_step_deltas
from worker.text.fused_generator import FusedBatchGenerator, FusionError
from worker.text.prefill_pacing import PrefillPacer
from worker.text.prefix_reuse import PrefixReuse
from worker.text.request import TextRequest, build_text_request, terminal
from worker.text.settings import GenerationSettings
from worker.text.speculation.config import Speculation
from worker.text.speculation.counters import SpecCounts
from worker.text.speculation.draft import DraftProposer
from worker.text.speculation.kv_rewind import trimmed
from worker.text.speculation.speculator import NgramProposer, Proposer, Speculator
from worker.text.speculation.verify import unwrapped

log = logging.getLogger(__name__)


class KvKeeper(Protocol):
    """Where an ended request's KV goes: the prefix cache (`PrefixKeeper`), or a vision
    model's conversation state (worker/vision/engine.py)."""

    def wants(self, request: TextRequest) -> bool: ...  # whether to take it out of the batch

    def keep(self, request: TextRequest, tokens: list[int], cache: list[Any]) -> None: ...


@dataclass(frozen=True)
class PrefixKeeper:
    """The text engine's KvKeeper: an ended request's KV to the prefix cache."""

    prefix: PrefixReuse

    def wants(self, request: TextRequest) -> bool:
        return self.prefix.enabled

    def keep(self, request: TextRequest, tokens: list[int], cache: list[Any]) -> None:
        self.prefix.store(tokens, cache)


@dataclass(slots=True)
class _Entry:
    uid: int
    request: TextRequest
    error: Exception | None = None  # raised by one of its logits processors


class BatchTextEngine:
    """worker.runtime.engine.Engine for text with continuous batching; see the module docstring."""

    ops = frozenset({Op.CHAT, Op.COMPLETE})

    def __init__(
        self,
        text_model: Any,
        settings: GenerationSettings,
        max_num_seqs: int,
        prefix: PrefixReuse | None = None,
        pacer: PrefillPacer | None = None,
        fuse: bool = True,
        speculation: Speculation | None = None,
        rows: Callable[[list[TextRequest | None]], AbstractContextManager[None]] | None = None,
        keeper: KvKeeper | None = None,
    ) -> None:
        self._text_model = text_model
        self._settings = settings
        self._max_num_seqs = max_num_seqs
        self._prefix = prefix or PrefixReuse(None)
        # What every model call is built under, given its rows' requests (a vision model's
        # positions), and where an ended request's KV goes (the prefix cache, or a vision
        # conversation's state): see `join`.
        self._rows = rows
        self._keeper: KvKeeper = keeper or PrefixKeeper(self._prefix)
        self._pacer = pacer or PrefillPacer(settings.prefill_step_size, ratio=0)
        # Paced chunks ride in the decode step's forward pass (worker/text/fused_forward.py);
        # unpaced, every chunk is a whole prefill_step_size, as in mlx-lm.
        self._fuse = fuse and self._pacer.enabled
        self._speculation = speculation or Speculation()
        self._speculator: Speculator | None = None  # the current generator's
        self._spec_reported = SpecCounts()  # its totals already counted into the stats
        # LoRA adapters loaded at run time, chosen per request (None: the model takes none).
        self.adapters: Adapters | None = getattr(text_model, "adapters", None)
        eos = sorted(text_model.tokenizer.eos_token_ids)
        self._stop_tokens = StopSequences([[t] for t in eos])
        self._generator = self._new_generator()
        if self.adapters is not None and not self._generator.routable:
            log.error("this mlx-lm's BatchGenerator lacks what per-request adapters need: none")
            self.adapters = None
        self._by_id: dict[str, _Entry] = {}
        self._by_uid: dict[int, _Entry] = {}
        self._stats: Any = None  # the worker's counters, once bound

    def bind_stats(self, stats: Any) -> None:
        self._prefix.stats = stats  # counts the prefix-cache lookups
        self._stats = stats

    @property
    def routable(self) -> bool:
        """Whether every model call can be built under its rows' context (`rows`)."""
        return self._generator.routable

    def capabilities(self) -> list[Capability]:
        return [Capability.CHAT, Capability.COMPLETE]

    def ready_info(self) -> TextInfo:
        adapters = loaded(self.adapters) if self.adapters is not None else None
        return TextInfo(self._text_model.max_context, "continuous", adapters=adapters)

    def decoding(self) -> int:
        """How many of its requests are past their prompt."""
        return sum(1 for entry in self._by_id.values() if entry.request.generated)

    def synchronize(self) -> None:
        """Waits for the step in flight (a step waits only for the one before it)."""
        mx.synchronize(self._generator.stream)

    def active_ids(self) -> list[str]:
        return list(self._by_id)

    def _collect_adapters(self) -> None:
        """Frees unloaded adapters no running request holds (worker/text/adapters/)."""
        if self.adapters is not None and self.adapters.pending:
            self.adapters.collect(self.adapter_slots())

    def adapter_slots(self) -> list[int]:
        """The adapter slots the running requests hold."""
        return [entry.request.adapter for entry in self._by_id.values()]

    def admit(self, submit: Submit) -> Delta:
        try:
            request = build_text_request(self._text_model, submit)
            request.adapter = slot_for(self.adapters, submit.adapter)
            self.insert(request)
        except RequestError as exc:
            return terminal(submit.request_id, FinishReason.ERROR, error=exc.info())
        except Exception as exc:
            log.exception(
                "request %s could not start", submit.request_id, extra=named(submit.request_id)
            )
            return terminal(submit.request_id, FinishReason.ERROR, error=internal(exc))
        return request.accepted()

    def step(self) -> list[Delta]:
        if not self._by_id:
            return []
        try:
            responses = self._paced_next() if self._pacer.enabled else self._generator.next()[1]
        except Exception as exc:
            log.exception("a batch step failed; ending the %d requests in it", len(self._by_id))
            return self._fail_all(exc)
        deltas = []
        ended: set[int] = set()
        for response in responses:
            if response.uid in ended:  # speculation: tokens after its end in the same step
                continue
            entry = self._by_uid.get(response.uid)
            if entry is None:  # cannot happen: every uid in the generator is ours
                log.error("the batch generator returned unknown uid %d", response.uid)
                continue
            delta = self._accept(entry, response)
            if delta.finish_reason is not None:
                ended.add(response.uid)
            deltas.append(delta)
        self._count_speculation()
        self._collect_adapters()
        return merge_step_deltas(deltas)

    def _count_speculation(self) -> None:
        """Adds what speculation did since the last step to the worker's counters."""
        if self._speculator is None or self._stats is None:
            return
        new = self._speculator.totals.since(self._spec_reported)
        if new.drafts:
            self._stats.count_speculation(
                new.drafts, new.draft_tokens, new.accepted_tokens, new.accepted_per_position
            )
            self._spec_reported = self._speculator.totals.copy()

    def _paced_next(self) -> list[Any]:
        """One BatchGenerator step with the pacer's chunk, timed for the pacer."""
        decoding = self.decoding()
        prefilling = len(self._by_id) - decoding
        chunk = self._pacer.chunk(decoding, prefilling)
        self._generator.prefill_step_size = chunk  # read by BatchGenerator.next for this step
        fused = self._generator.fused_tokens
        with self._generator.stats() as work:
            _, responses = self._generator.next()
            if self._generator.fuse and decoding and prefilling:
                # A step waits only for the graph the step before started; a fused chunk is in
                # the one this step started. Waiting for that one too times each step's own
                # chunk on every backend (on an asynchronous one the pacer would otherwise
                # take the last chunk's time for this step's, and a decode-only probe's for
                # the chunk's). It costs the overlap of host work only while a prompt is paced.
                self.synchronize()
        self._pacer.record(work.wall_time, work.prompt_tokens)
        if self._stats is not None and self._generator.fused_tokens > fused:
            self._stats.count_prefill_in_decode(self._generator.fused_tokens - fused)
        return responses

    def abort(self, request_ids: Iterable[str]) -> list[Delta]:
        deltas = []
        for request_id in request_ids:
            entry = self._by_id.get(request_id)
            if entry is not None:
                self._leave(entry, store=True)
                deltas.append(entry.request.end(FinishReason.ABORT))
        self._collect_adapters()
        return deltas

    def insert(self, request: TextRequest, hidden: int = 0) -> None:
        """Starts a built request: its prompt (what the prefix cache lacks of it) prefilled
        in the batch, then decoded with the others; its logits processors see the tokens
        past the first `hidden` of the prompt (all of them by default, as mlx-lm shows them;
        a vision model's from the prompt's last on, as mlx-vlm does)."""
        # The prefix cache holds the base model's KV: an adapter's request neither reuses nor
        # fills it.
        reuse = request.adapter == BASE
        cache, cached = self._prefix.fetch(request.prompt) if reuse else (None, 0)
        request.cached_tokens = cached
        self._add(request, request.prompt[cached:], cache, request.prompt[:cached], None, hidden)

    def join(self, request: TextRequest, cache: list[Any], hidden: int = 0) -> None:
        """Goes on with a request whose prefill ran elsewhere (a vision request's, on
        mlx-vlm's own path) and which returned a token: `cache` holds its prompt and the
        tokens it returned but the last, which is fed first. Its logits processors go on
        seeing what they saw there: the tokens past the first `hidden` of the prompt."""
        *before, last = request.generated
        left = request.max_tokens - request.completion_tokens
        self._add(request, [last], cache, request.prompt + before, left, hidden)

    def _add(
        self,
        request: TextRequest,
        tokens: list[int],
        cache: list[Any] | None,
        context: list[int],
        max_tokens: int | None = None,
        hidden: int = 0,
    ) -> None:
        """`tokens` into the generator after the `context` its `cache` holds."""
        entry = _Entry(uid=-1, request=request)
        processors = [_guarded(entry, _past(p, hidden)) for p in request.logits_processors]
        [entry.uid] = self._generator.insert(
            [tokens],
            max_tokens=[request.max_tokens if max_tokens is None else max_tokens],
            caches=[cache] if cache is not None else None,
            # The tokens already in the cache: the context logits processors see.
            all_tokens=[list(context)],
            samplers=[request.sampler],
            logits_processors=[processors],
            stop_sequences=[self._stop_tokens],
        )
        self._by_id[request.request_id] = entry
        self._by_uid[entry.uid] = entry

    def _accept(self, entry: _Entry, response: Any) -> Delta:
        request = entry.request
        ended_by_generator = response.finish_reason is not None
        if entry.error is None:
            try:
                logprobs = response.logprobs if request.logprobs is not None else None
                delta = request.accept(response.token, logprobs, end=response.finish_reason)
            except Exception as exc:
                entry.error = exc
        if entry.error is not None:
            log.error(
                "request %s failed: %r",
                request.request_id,
                entry.error,
                extra=named(request.request_id),
            )
            self._leave(entry, store=False, in_generator=not ended_by_generator)
            error = entry.error
            info = error.info() if isinstance(error, RequestError) else internal(error)
            return request.end(FinishReason.ERROR, info)
        if delta.finish_reason is not None:
            if ended_by_generator:
                self._forget(entry)
                self._store(entry, response.all_tokens, response.prompt_cache)
            else:  # a stop string (or the parser) ended it: the generator still runs it
                self._leave(entry, store=True)
        return delta

    def _leave(self, entry: _Entry, store: bool, in_generator: bool = True) -> None:
        """Takes a request out of the batch; its cache goes to the keeper (the prefix cache)
        when `store` and it got past its prefill."""
        self._forget(entry)
        if not in_generator:
            return
        keep = store and self._keeper.wants(entry.request) and bool(entry.request.generated)
        keep = keep and entry.request.adapter == BASE
        caches = self._generator.remove([entry.uid], return_prompt_caches=keep)
        if keep and entry.uid in caches:
            cache, tokens = caches[entry.uid]
            self._store(entry, tokens, cache)

    def _store(self, entry: _Entry, tokens: list[int], cache: list[Any]) -> None:
        """Stores a request's cache, cut to its prompt and the tokens it returned: with
        speculation the generator may hold accepted tokens past a stop string."""
        request = entry.request
        if request.adapter != BASE:
            return
        extra = len(tokens) - (request.prompt_tokens + len(request.generated))
        if extra > 0:
            cache = trimmed(cache, extra)
            tokens = tokens[:-extra]
        self._keeper.keep(request, tokens, cache)

    def _forget(self, entry: _Entry) -> None:
        self._by_id.pop(entry.request.request_id, None)
        self._by_uid.pop(entry.uid, None)
        if self._speculator is not None:
            counts = self._speculator.forget(entry.uid)
            if counts.drafts:
                note(entry.request.request_id, counts.describe())

    def _fail_all(self, exc: Exception) -> list[Delta]:
        if isinstance(exc, FusionError):
            log.error("prefill chunks no longer ride in decode steps: %s", exc)
            self._fuse = False
        entries = list(self._by_id.values())
        self._by_id.clear()
        self._by_uid.clear()
        try:
            self._generator.close()
        except Exception:
            log.exception("closing the failed batch generator failed")
        self._generator = self._new_generator()
        self._collect_adapters()
        mx.clear_cache()
        return [e.request.end(FinishReason.ERROR, internal(exc)) for e in entries]

    def _new_generator(self) -> FusedBatchGenerator:
        n = self._max_num_seqs
        self._speculator = self._new_speculator()
        self._spec_reported = SpecCounts()
        return FusedBatchGenerator(
            self._text_model.model,
            fuse=self._fuse,
            speculator=self._speculator,
            prefill_step_size=self._settings.prefill_step_size,
            # The scheduler admits at most max_num_seqs requests: the generator never queues.
            prefill_batch_size=n,
            completion_batch_size=n,
            adapters=self.adapters,
            slot_of=self._slot_of,
            rows=None if self._rows is None else self._row_requests,
        )

    def _row_requests(self, uids: list[int]) -> AbstractContextManager[None]:
        assert self._rows is not None
        return self._rows([entry.request if (entry := self._by_uid.get(u)) else None for u in uids])

    def _slot_of(self, uid: int) -> int:
        entry = self._by_uid.get(uid)
        return entry.request.adapter if entry is not None else BASE

    def _new_speculator(self) -> Speculator | None:
        spec = self._speculation
        if spec.method == "ngram":
            proposer: Proposer = NgramProposer(spec.lookup_min, spec.lookup_max)
        elif spec.method == "draft":
            proposer = DraftProposer(self._text_model.draft_model)
        else:
            return None
        return Speculator(proposer, spec.num_draft_tokens)


def _past(processor: Callable, hidden: int) -> Callable:
    """`processor` shown the tokens past the first `hidden` (see `join`)."""
    if not hidden:
        return processor

    def run(tokens: mx.array, logits: mx.array) -> mx.array:
        return processor(tokens[hidden:], logits)

    run.processor = unwrapped(processor)  # type: ignore[attr-defined]
    return run


def _guarded(entry: _Entry, processor: Callable) -> Callable:
    """A processor that records its exception on its request instead of breaking the step."""

    def run(tokens: mx.array, logits: mx.array) -> mx.array:
        if entry.error is not None:
            return logits
        try:
            return processor(tokens, logits)
        except Exception as exc:
            entry.error = exc
            return logits

    run.processor = unwrapped(processor)  # type: ignore[attr-defined]
    return run
