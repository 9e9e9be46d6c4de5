"""The batch-1 text path: each request on its own mlx-lm generator, interleaved round robin.

mlx-lm 0.32's BatchGenerator has no draft model, no KV quantization and no `keep` in its
rotating cache, so with `--draft-model`, `--kv-bits` or `--max-kv-size` every request runs
through `generate_step` / `speculative_generate_step` instead, exactly as `stream_generate`
runs them. Each engine step gives every request one unit of work: one prefill chunk while its
prompt is being prefilled, else one token; so aborts and deadlines apply between chunks, and a
long prompt does not freeze the other streams.

The prefill is done here, chunk by chunk, with mlx-lm's own chunk boundaries and cache
quantization; the generator then starts from the last prompt token. This computes exactly what
mlx-lm computes. Logits processors of `generate_step` see the whole prompt as their context
(as in mlx-lm); those of `speculative_generate_step` see what mlx-lm shows them there (its
context starts at the last prompt token).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any, cast

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.generate import (
    generate_step,
    generation_stream,
    maybe_quantize_kv_cache,
    speculative_generate_step,
)
from mlx_lm.models.cache import QuantizedKVCache, make_prompt_cache

from protocol.inputs import Op
from protocol.messages import Delta, FinishReason, Submit
from protocol.ready import Capability, TextInfo
from worker.runtime.errors import RequestError, internal
from worker.runtime.request_log import named
from worker.text.adapters.control import loaded
from worker.text.adapters.registry import BASE, AdaptedModel, Adapters, slot_for
from worker.text.prefix_reuse import PrefixReuse
from worker.text.request import TextRequest, all_tokens, build_text_request, terminal
from worker.text.settings import GenerationSettings

log = logging.getLogger(__name__)


class SoloGeneration:
    """One request's KV cache(s) and mlx-lm generator; `cache` may hold a cached prefix (for
    a draft model: the model's layers, then the draft's)."""

    def __init__(
        self,
        model: nn.Module,
        request: TextRequest,
        settings: GenerationSettings,
        draft_model: nn.Module | None = None,
        cache: list[Any] | None = None,
    ) -> None:
        self.request = request
        self._model = model
        self._draft = draft_model
        self._settings = settings
        if cache is None:
            # A draft model rules out a rotating cache (as in stream_generate).
            max_kv = None if draft_model is not None else settings.max_kv_size
            cache = make_prompt_cache(model, max_kv_size=max_kv)
            if draft_model is not None:
                cache += make_prompt_cache(draft_model)
        layers = len(model.layers)
        # One list per model; mlx-lm's cache quantization replaces items of the list it gets.
        self._caches = [cache[:layers]] + ([cache[layers:]] if draft_model is not None else [])
        self.prefilled = request.cached_tokens  # prompt tokens already in the cache
        self._tokens: Iterator[tuple[int, mx.array]] | None = None

    @property
    def uses_draft(self) -> bool:
        return self._draft is not None

    @property
    def cache(self) -> list[Any]:
        """The model's cache layers, then the draft model's (the prefix cache's layout)."""
        return [c for caches in self._caches for c in caches]

    @property
    def prefill_pending(self) -> bool:
        """Whether prompt tokens other than the last remain to be prefilled."""
        return self.request.prompt_tokens - self.prefilled > 1

    def prefill_chunk(self) -> None:
        """Feeds the next chunk of the prompt (all but its last token) to the model(s)."""
        prompt = self.request.prompt
        n = min(self._settings.prefill_step_size, len(prompt) - self.prefilled - 1)
        if n <= 0:
            return
        chunk = mx.array(prompt[self.prefilled : self.prefilled + n])
        models = [self._model] + ([self._draft] if self._draft is not None else [])
        with mx.stream(generation_stream):
            for model, cache in zip(models, self._caches, strict=True):
                model(chunk[None], cache=cache)
                self._quantize(cache)
                mx.eval([c.state for c in cache])
        self.prefilled += n
        mx.clear_cache()

    def next_token(self) -> tuple[int, mx.array]:
        """The next token and the log-softmax it was sampled from (prefill must be done)."""
        while self.prefill_pending:
            self.prefill_chunk()
        if self._tokens is None:
            self._tokens = self._start()
        token, logprobs = next(self._tokens)
        return int(token), logprobs

    def close(self) -> None:
        """Stops the generator (a speculative one rewinds its caches to what it yielded)."""
        if self._tokens is not None:
            self._tokens.close()  # type: ignore[attr-defined]

    def reusable_cache(self) -> tuple[list[int], list[Any]] | None:
        """(tokens, cache) to store in the prefix cache after `close`: the cache cut to the
        tokens it holds that the request has seen; None when it cannot be cut (rotating)."""
        tokens = all_tokens(self.request)
        cache = self.cache
        if not all(c.is_trimmable() for c in cache):
            return None
        # A speculative generator may have run ahead of what it yielded, and the draft model
        # one token behind the model: keep what every layer holds.
        n = min(min(c.offset for c in cache), len(tokens))
        if n <= 0:
            return None
        for c in cache:
            c.trim(c.offset - n)
        return tokens[:n], cache

    def _quantize(self, cache: list[Any]) -> None:
        s = self._settings
        maybe_quantize_kv_cache(cache, s.quantized_kv_start, s.kv_group_size, s.kv_bits)

    def _start(self) -> Iterator[tuple[int, mx.array]]:
        request, s = self.request, self._settings
        last = mx.array(request.prompt[-1:])
        common = dict(
            max_tokens=request.max_tokens,
            sampler=request.sampler,
            prompt_cache=self._caches[0],
            prefill_step_size=s.prefill_step_size,
            kv_bits=s.kv_bits,
            kv_group_size=s.kv_group_size,
            quantized_kv_start=s.quantized_kv_start,
        )
        if self._draft is not None:
            common["prompt_cache"] = self.cache
            steps = speculative_generate_step(
                last,
                self._model,
                self._draft,
                num_draft_tokens=s.num_draft_tokens,
                logits_processors=request.logits_processors or None,
                **common,
            )
            return ((token, logprobs) for token, logprobs, _ in steps)
        context = mx.array(request.prompt[:-1])
        processors = [_with_context(p, context) for p in request.logits_processors]
        return generate_step(last, self._model, logits_processors=processors or None, **common)


def _with_context(processor: Any, context: mx.array) -> Any:
    """generate_step shows processors the tokens it was given; ours got the prompt's head
    prefilled here, so it is put back in front, as generate_step would have it."""
    if context.size == 0:
        return processor

    def run(tokens: mx.array, logits: mx.array) -> mx.array:
        return processor(mx.concatenate([context, tokens.astype(context.dtype)]), logits)

    return run


class SoloTextEngine:
    """worker.runtime.engine.Engine for text on the batch-1 path; see the module docstring."""

    ops = frozenset({Op.CHAT, Op.COMPLETE})

    def __init__(
        self,
        text_model: Any,
        settings: GenerationSettings,
        prefix: PrefixReuse | None = None,
    ) -> None:
        self._text_model = text_model
        self._settings = settings
        # A rotating cache that wrapped around cannot serve as a prefix.
        usable = prefix is not None and settings.max_kv_size is None
        self._prefix = prefix if usable else PrefixReuse(None)
        self._active: dict[str, SoloGeneration] = {}
        # LoRA adapters loaded at run time, chosen per request (None: the model takes none).
        self.adapters: Adapters | None = getattr(text_model, "adapters", None)

    def bind_stats(self, stats: Any) -> None:
        self._prefix.stats = stats  # counts the prefix-cache lookups

    def capabilities(self) -> list[Capability]:
        return [Capability.CHAT, Capability.COMPLETE]

    def ready_info(self) -> TextInfo:
        adapters = loaded(self.adapters) if self.adapters is not None else None
        return TextInfo(self._text_model.max_context, "interleaved batch-1", adapters=adapters)

    def active_ids(self) -> list[str]:
        return list(self._active)

    def _collect_adapters(self) -> None:
        """Frees unloaded adapters no running request holds (worker/text/adapters/)."""
        if self.adapters is not None and self.adapters.pending:
            self.adapters.collect(self.adapter_slots())

    def adapter_slots(self) -> list[int]:
        """The adapter slots the running requests hold."""
        return [generation.request.adapter for generation in self._active.values()]

    def admit(self, submit: Submit) -> Delta:
        try:
            request = build_text_request(self._text_model, submit)
            request.adapter = slot_for(self.adapters, submit.adapter)
            model, draft = self._text_model.model, self._text_model.draft_model
            if request.adapter != BASE and self.adapters is not None:
                # Its calls run under its adapter; the prefix cache holds the base model's KV.
                # It stands in for the module (its calls, its attributes) in mlx-lm's generators.
                model = cast(nn.Module, AdaptedModel(model, self.adapters, request.adapter))
                cache, cached = None, 0
            else:
                cache, cached = self._prefix.fetch(request.prompt, self._reusable)
            if request.constrained and draft is not None:
                # mlx-lm's speculative generator also runs the processors on draft tokens it
                # may reject, which would advance a constraint's state: no draft for these.
                draft = None
                cache = cache[: len(model.layers)] if cache is not None else None
            request.cached_tokens = cached
            generation = SoloGeneration(model, request, self._settings, draft, cache)
        except RequestError as exc:
            return terminal(submit.request_id, FinishReason.ERROR, error=exc.info())
        except Exception as exc:
            log.exception(
                "request %s could not start", submit.request_id, extra=named(submit.request_id)
            )
            return terminal(submit.request_id, FinishReason.ERROR, error=internal(exc))
        self._active[submit.request_id] = generation
        return generation.request.accepted()

    def _reusable(self, cache: list[Any], cached: int) -> bool:
        """A quantized prefix is reused only where mlx-lm would have quantized it too: a prompt
        whose head is short of `quantized_kv_start` attends to unquantized keys and values."""
        quantized = any(isinstance(c, QuantizedKVCache) for c in cache)
        return not quantized or cached >= self._settings.quantized_kv_start

    def step(self) -> list[Delta]:
        deltas = []
        for request_id, generation in list(self._active.items()):
            try:
                if generation.prefill_pending:
                    generation.prefill_chunk()
                    if generation.prefill_pending:
                        continue
                token, logprobs = generation.next_token()
                delta = generation.request.accept(token, logprobs)
            except Exception as exc:
                log.exception("request %s failed", request_id, extra=named(request_id))
                error = exc.info() if isinstance(exc, RequestError) else internal(exc)
                deltas.append(self._remove(request_id, keep=False).end(FinishReason.ERROR, error))
                continue
            if delta.finish_reason is not None:
                self._remove(request_id)
            deltas.append(delta)
        self._collect_adapters()
        return deltas

    def abort(self, request_ids: Iterable[str]) -> list[Delta]:
        ended = [
            self._remove(request_id).end(FinishReason.ABORT)
            for request_id in request_ids
            if request_id in self._active
        ]
        self._collect_adapters()
        return ended

    def _remove(self, request_id: str, keep: bool = True) -> TextRequest:
        """Drops a request; stores its cache when it got past its prefill and `keep`."""
        generation = self._active.pop(request_id)
        generation.close()
        # Entries hold the draft model's layers too when there is one (the cache's layout).
        layout_ok = generation.uses_draft == (self._text_model.draft_model is not None)
        base = generation.request.adapter == BASE
        if keep and base and layout_ok and generation.request.generated and self._prefix.enabled:
            reusable = generation.reusable_cache()
            if reusable is not None:
                self._prefix.store(*reusable)
        return generation.request
