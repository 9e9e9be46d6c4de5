"""Chat with images (and audio) on mlx-vlm: a paced prefill per request, then one decode batch.

A prompt with images, video or audio runs on its own `mlx_vlm.stream_generate` generator, fed
the inputs worker/vision/prompt.py prepared exactly as mlx-vlm would; `step()` advances every
such generator by one unit, round robin, so aborts and deadlines apply between units. A unit
is one token, or during the prefill one call of the vision tower or one prefill chunk
(`prefill_step_size` tokens): the generator runs in a greenlet paused before each
(worker/vision/paced.py), so another request's tokens are held for one unit at most, not for
a whole prefill. Where the model's family decodes in a batch (worker/vision/batched.py:
Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Gemma 3, without audio input), a request leaves its
generator at its first token and `join`s the decode batch (the text engine's, over mlx-lm's
BatchGenerator) with the KV cache the generator filled, its sampler's key and its processors'
view of the tokens carried over, so it decodes what its generator would have; text-only
prompts go to that batch from the start (its processors shown what mlx-vlm shows them). The
other families, audio prompts and spoken replies (worker/vision/talker.py) stay on their
generator to the end. While requests decode in the batch, one of the requests prefilling for
it runs its unit a step, in turn, so a decode step waits for one unit, not one of each. The
request's own sampler and logits processors are used throughout, and every token goes once
through the same `TextRequest` the text engines use (EOS, max_tokens, stop strings,
detokenizing, reasoning/tool parsing, logprobs, usage), so greedy output equals
`mlx_vlm.generate` on the same messages and files.

What is reused across requests:
- image features: one shared `VisionFeatureCache` keyed by a hash of the preprocessed pixels
  (and grid), so a request whose images equal an earlier one's skips the vision tower
  (worker/vision/features.py: which models this covers);
- prompt KV, when the worker's prefix cache is on (`--prefix-cache-bytes` > 0; half of it for
  each of the two): text-only prompts through the batch's prefix cache (the text engines'
  token trie) on the batched families, else mlx-vlm's automatic prefix cache (APC,
  `APCManager`), whose block keys include a hash of the request's media; and conversations
  with images through worker/vision/turns.py (mlx-vlm's APC never reuses a prefix holding
  image tokens): one KV cache per conversation, keyed by the images' content hash, so a
  follow-up turn about the same pictures prefills only its new text, and prompts with other
  images never share KV. Requests with audio use neither (see `admit`: mlx-vlm mishandles
  audio prompts there). A request in the batch stores its KV cut to the tokens it returned,
  however it ended but by an error; one on its generator only when the generator runs to its
  end (EOS or max_tokens). `Usage.cached_tokens` counts the prompt tokens not prefilled again.

Qwen-style models keep the current request's mRoPE offsets on the language model object;
each generator's copy is put back before its `next()` and saved after, so interleaved
requests never see each other's positions (in the batch, each row's offset is given to every
call). Everything here runs on the MLX thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from protocol.inputs import ChatInputs, CompleteInputs, Op
from protocol.messages import Delta, FinishReason, Submit
from protocol.ready import Capability, TextInfo
from worker.runtime.errors import RequestError, internal
from worker.runtime.request_log import named
from worker.text.batch_engine import BatchTextEngine
from worker.text.prefix_reuse import PrefixReuse
from worker.text.request import TextRequest, make_text_request, terminal
from worker.text.settings import GenerationSettings
from worker.vision.batched import (
    BatchedLanguageModel,
    BatchModel,
    Lookahead,
    batched,
    prompt_cache,
    rope_offset,
)
from worker.vision.features import CountingVisionCache, prefill_features
from worker.vision.model import VisionModel
from worker.vision.paced import PAUSED, StepRun, pace
from worker.vision.prompt import VisionInputs, build_vision_inputs
from worker.vision.talker import TalkerGeneration, check_talker_request, talker_speakers
from worker.vision.turns import ConversationCache, Lease, media_key

log = logging.getLogger(__name__)

APC_BLOCK_SIZE = 16  # tokens per APC block (mlx-vlm's default)
# Attributes where mlx-vlm's Qwen-style language models keep per-generation rotary state.
_STATE_ATTRIBUTES = ("_rope_deltas", "_position_ids")


def make_apc_manager(model: Any, budget_bytes: int) -> Any:
    """mlx-vlm's prefix cache holding at most `budget_bytes` of KV; None when 0 or when the
    model's cache layout does not support it."""
    from mlx_vlm.apc import APCManager, model_supports_apc

    if budget_bytes <= 0 or not model_supports_apc(model.language_model):
        return None
    per_token = _kv_bytes_per_token(model)
    num_blocks = max(1, budget_bytes // (APC_BLOCK_SIZE * per_token))
    overrides = {"memory_max_gb": budget_bytes / 2**30}
    return APCManager(num_blocks=num_blocks, block_size=APC_BLOCK_SIZE, overrides=overrides)


def make_text_prefix_caches(vm: VisionModel, budget_bytes: int) -> tuple[Any, PrefixReuse]:
    """The caches of text-only prompts, `budget_bytes` of KV: the text engine's prefix cache
    where the model decodes in the batch (its text prompts are prefilled there), else
    mlx-vlm's APC. (APC manager or None, PrefixReuse)."""
    from worker.text.prefix_reuse import open_prefix_cache

    if not batched(vm.model) or vm.takes_audio:
        return make_apc_manager(vm.model, budget_bytes), PrefixReuse(None)
    cache = open_prefix_cache(budget_bytes, vm.path, {"engine": "mlx-vlm", "prompts": "text"})
    return None, PrefixReuse(cache)


def _kv_bytes_per_token(model: Any) -> int:
    """Keys and values of one token over all layers (float32 upper bound when unknown)."""
    lm = model.language_model
    # Text settings: `args` on Qwen-style language models, `config` on Gemma 3's.
    args = getattr(lm, "args", None) or lm.config
    heads = getattr(args, "num_attention_heads", 1)
    kv_heads = getattr(args, "num_key_value_heads", None) or heads
    head_dim = getattr(args, "head_dim", None) or args.hidden_size // heads
    dtype_bytes = model.language_model.model.embed_tokens.weight.dtype.size
    return max(1, 2 * len(model.layers) * kv_heads * head_dim * dtype_bytes)


class _ModelState:
    """Swaps the per-generation attributes of the language model (see the module docstring)."""

    def __init__(self, model: Any) -> None:
        self._lm = getattr(model, "language_model", model)
        self._names = [n for n in _STATE_ATTRIBUTES if hasattr(self._lm, n)]

    def fresh(self) -> dict[str, Any]:
        return dict.fromkeys(self._names)

    def put(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self._lm, name, value)

    def take(self) -> dict[str, Any]:
        return {name: getattr(self._lm, name) for name in self._names}


class VisionGeneration:
    """One request: its TextRequest and its mlx-vlm generator (created at the first token)."""

    def __init__(
        self,
        request: TextRequest,
        inputs: VisionInputs,
        kwargs: dict[str, Any],
        joins: bool = False,
    ) -> None:
        self.request = request
        self.uses_apc = kwargs.get("apc_manager") is not None
        self._inputs = inputs
        self._kwargs = kwargs
        # Whether it goes on in the decode batch after its first token (worker/vision/batched.py).
        self.joins = joins
        self.lookahead = Lookahead(request.sampler, request.logits_processors)
        if joins:
            kwargs["sampler"] = self.lookahead.sample
            kwargs["logits_processors"] = self.lookahead.processors()
        self._results: StepRun | None = None
        self._state: dict[str, Any] = {}
        self.lease: Lease | None = None  # its conversation state, when it has images
        self.looked_up = False  # its prefix-cache lookup (the first advance) was counted
        self.prompt_tokens = 0  # the prompt's tokens as mlx-vlm counted them (at its first)

    def advance(self, vm: VisionModel, state: _ModelState) -> Delta | None:
        """Generates one token and returns its Delta; None: a unit of the prefill ran."""
        if self._results is None:
            self._state = state.fresh()
            self._results = StepRun(lambda: self._start(vm))
        result = self._next(state)
        if result is PAUSED:
            return None
        request = self.request
        if result is not None:
            request.cached_tokens = result.cached_tokens or 0
            self.prompt_tokens = result.prompt_tokens
        if result is None or (result.finish_reason == "length" and not result.token_ids):
            # mlx-vlm ended without a token: only when it had no budget at all.
            return request.end(FinishReason.LENGTH)
        if result.finish_reason == "length":
            # mlx-vlm's closing result repeats the last token, which was accepted already;
            # TextRequest ends at max_tokens first, so this is reached only if they disagree.
            log.warning(
                "request %s: mlx-vlm ended at its max_tokens first",
                request.request_id,
                extra=named(request.request_id),
            )
            self._drain(state)
            return request.end(FinishReason.LENGTH)
        end = FinishReason.STOP if result.finish_reason == "stop" else None
        # On a stop, mlx-vlm's closing result carries the EOS token it did not yield before.
        delta = request.accept(int(result.token), result.logprobs, end=end)
        if delta.finish_reason is not None:
            if end is not None or request.completion_tokens >= request.max_tokens:
                self._drain(state)  # mlx-vlm ends here too: let it store the prompt's KV
            else:
                self.close()
        return delta

    def _start(self, vm: VisionModel) -> Iterator[Any]:
        """mlx-vlm's generator for the request (run inside its StepRun)."""
        from mlx_vlm import stream_generate

        inputs = self._inputs
        cache = self._kwargs.get("vision_cache")
        if cache is not None:
            prefill_features(cache, vm.model, inputs.tensors, bool(inputs.images))
        return stream_generate(
            vm.model,
            vm.processor,
            inputs.prompt,
            image=inputs.images or None,
            audio=inputs.audios or None,
            **inputs.tensors,
            **self._kwargs,
        )

    def _next(self, state: _ModelState) -> Any:
        """The generator's next result, PAUSED, or None at its end."""
        assert self._results is not None
        state.put(self._state)
        try:
            step = self._results.advance()
        finally:
            self._state = state.take()
        if step is PAUSED:
            return PAUSED
        return None if step is None else step[0]

    def _drain(self, state: _ModelState) -> None:
        """Runs the generator to its end (at most the closing result, then its APC store)."""
        for _ in range(2):
            result = self._next(state)
            while result is PAUSED:  # (no prefill is left; a unit would still be run through)
                result = self._next(state)
            if result is None:
                self._results = None
                return
        self.close()

    def handoff(self) -> tuple[list[Any], int] | None:
        """After its first token: the KV cache of its prompt and its mRoPE offset, for the
        decode batch (worker/vision/batched.py), its generator closed and its sampler's key
        rewound; None (and nothing changed) when the cache cannot be cut back to the prompt.
        Tried once: after it, the request stays on its generator."""
        assert self._results is not None
        self.joins = False
        cache = prompt_cache(self._results.cache, self.prompt_tokens)
        if cache is None:
            return None
        self.close()
        self.lookahead.rewind()
        if self.lease is not None:
            self.lease.state.cache = None  # the batch has a copy; `keep` stores the new one
        return cache, rope_offset(self._state)

    def close(self) -> None:
        if self._results is not None:
            self._results.stop()
            self._results = None


class VisionEngine:
    """worker.runtime.engine.Engine for an mlx-vlm model; see the module docstring."""

    ops = frozenset({Op.CHAT, Op.COMPLETE})

    def __init__(
        self,
        vision_model: VisionModel,
        prefill_step_size: int | None = None,
        apc_manager: Any = None,
        vision_cache: CountingVisionCache | None = None,
        turns: ConversationCache | None = None,
        talker_max_frames: int = 4096,
        max_num_seqs: int = 8,
        text_prefix: PrefixReuse | None = None,
        decode_batch: bool = True,
    ) -> None:
        self._vm = vision_model
        pace(vision_model.model)
        # The decode batch (worker/vision/batched.py), where the model's family has one
        # (`decode_batch` False: none, every request on its own generator).
        self._batch: BatchTextEngine | None = None
        self._text_prefix = text_prefix or PrefixReuse(None)
        self._offsets: dict[str, int] = {}  # mRoPE offsets of the requests in the batch
        self._leases: dict[str, Lease] = {}  # their conversation states, by request id
        self._prefill_turn = 0  # which prefilling generator advances while the batch decodes
        if decode_batch and batched(vision_model.model) and not vision_model.takes_audio:
            self._batch = self._decode_batch(prefill_step_size, max_num_seqs)
        self._talker_max_frames = talker_max_frames
        self._prefill_step_size = prefill_step_size
        self.apc_manager = apc_manager
        self.vision_cache = vision_cache if vision_cache is not None else CountingVisionCache()
        self.turns = turns if turns is not None else ConversationCache(0)
        self._state = _ModelState(vision_model.model)
        self._active: dict[str, VisionGeneration] = {}
        self.stats: Any = None  # the worker's WorkerStats, once bound

    def _decode_batch(
        self, prefill_step_size: int | None, max_num_seqs: int
    ) -> BatchTextEngine | None:
        vm = self._vm
        language_model = BatchedLanguageModel(vm.model.language_model)
        settings = GenerationSettings(prefill_step_size=prefill_step_size or 2048)
        batch = BatchTextEngine(
            BatchModel(language_model, vm.tokenizer, vm.max_context),
            settings,
            max_num_seqs,
            self._text_prefix,
            fuse=False,
            rows=lambda requests: language_model.rows(requests, self._offsets),
            keeper=self,
        )
        if not batch.routable:  # its rows' positions could not be given to every call
            log.error("this mlx-lm's BatchGenerator cannot route rows: vision requests batch-1")
            return None
        return batch

    def bind_stats(self, stats: Any) -> None:
        self.stats = stats
        if self._batch is not None:
            self._batch.bind_stats(stats)

    def capabilities(self) -> list[Capability]:
        caps = [Capability.CHAT, Capability.COMPLETE]
        if self._vm.takes_images:
            caps.append(Capability.IMAGE_IN)
        if self._vm.takes_audio:
            caps.append(Capability.AUDIO_IN)
        if self._vm.takes_images:  # as video (Qwen-VL) or its frames as stills (the others)
            caps.append(Capability.VIDEO_IN)
        return caps

    def ready_info(self) -> TextInfo:
        batching = "interleaved batch-1" if self._batch is None else "continuous"
        return TextInfo(self._vm.max_context, batching, talker_speakers(self._vm))

    def active_ids(self) -> list[str]:
        return list(self._active) + self.batched_ids()

    def batched_ids(self) -> list[str]:
        """The requests in the decode batch (worker/vision/batched.py)."""
        return [] if self._batch is None else self._batch.active_ids()

    def admit(self, submit: Submit) -> Delta:
        asked = submit.inputs
        assert isinstance(asked, ChatInputs | CompleteInputs)  # the scheduler routes by op
        try:
            inputs = build_vision_inputs(self._vm, asked)
            request = make_text_request(self._vm, submit.request_id, inputs.token_ids, asked)
            if isinstance(asked, ChatInputs) and asked.talker_speaker is not None:
                check_talker_request(self._vm, asked, request)
                eos = self._vm.model.config.im_end_token_id
                talker = TalkerGeneration(request, inputs, asked, eos, self._talker_max_frames)
                self._active[submit.request_id] = talker  # type: ignore[assignment]
                return request.accepted()
        except RequestError as exc:
            return terminal(submit.request_id, FinishReason.ERROR, error=exc.info())
        except Exception as exc:
            log.exception(
                "request %s could not start", submit.request_id, extra=named(submit.request_id)
            )
            return terminal(submit.request_id, FinishReason.ERROR, error=internal(exc))
        # Video requests skip every cache: the feature cache's encoders are written for images,
        # and a video's stills would share the conversation key of a request without them.
        video = bool(asked.videos) if isinstance(asked, ChatInputs) else False
        if self._batch is not None and not (inputs.images or inputs.audios or video):
            # Text only: prefilled and decoded in the batch, its processors shown the tokens
            # from the prompt's last on, as mlx-vlm shows them.
            self._batch.insert(request, hidden=request.prompt_tokens - 1)
            return request.accepted()
        kwargs: dict[str, Any] = {
            "max_tokens": request.max_tokens,
            "sampler": request.sampler,
            "logits_processors": request.logits_processors or None,
            # max_size 0 (--vision-cache-entries 0): every request encodes its images.
            "vision_cache": self.vision_cache
            if self.vision_cache.max_size > 0 and not video
            else None,
            # mlx-vlm's APC knows image and video placeholder tokens but not audio ones: on a
            # hit it trims the prompt yet keeps the audio features, which then no longer fit
            # (an error for Qwen3-Omni). Audio prompts therefore bypass it.
            "apc_manager": None if inputs.audios or video else self.apc_manager,
        }
        if self._prefill_step_size is not None:
            kwargs["prefill_step_size"] = self._prefill_step_size
        generation = VisionGeneration(request, inputs, kwargs, joins=self._batch is not None)
        # Conversations with images continue from their own KV cache (worker/vision/turns.py);
        # audio ones cannot, for the reason above.
        if inputs.images and not inputs.audios and not video and self.turns.enabled:
            images = asked.images if isinstance(asked, ChatInputs) else []
            generation.lease = self.turns.take(media_key(images), inputs.token_ids)
            kwargs["prompt_cache_state"] = generation.lease.state
        self._active[submit.request_id] = generation
        return generation.request.accepted()

    def _end(self, request_id: str, keep: bool = True) -> VisionGeneration:
        """Drops an ended request; its conversation state goes back if mlx-vlm updated it
        (and `keep`: not after an error)."""
        generation = self._active.pop(request_id)
        generation.close()
        if generation.lease is not None and keep:
            self.turns.give_back(generation.lease)
        return generation

    def step(self) -> list[Delta]:
        """One decode step of the batch, then a unit of the generators `_stepped` picks (a
        request that joins the batch in it decodes there from the next step)."""
        deltas = []
        if self._batch is not None and self._batch.active_ids():
            deltas = self._batch.step()
            for delta in deltas:
                if delta.finish_reason is not None:
                    self._offsets.pop(delta.request_id, None)
                    self._leases.pop(delta.request_id, None)  # (`keep` took the kept ones)
        return deltas + self._step_generators()

    def _stepped(self) -> list[tuple[str, Any]]:
        """The generators to advance this step: all of them, but while requests decode in
        the batch only one of those still prefilling for the batch (in turn), so a decode
        step waits for one unit of prefill, not one of each request's."""
        active = list(self._active.items())
        if self._batch is None or not self._batch.active_ids():
            return active
        prefilling = [(rid, g) for rid, g in active if getattr(g, "joins", False)]
        if not prefilling:
            return active
        self._prefill_turn = (self._prefill_turn + 1) % len(prefilling)
        chosen = prefilling[self._prefill_turn]
        return [(rid, g) for rid, g in active if not getattr(g, "joins", False) or g is chosen[1]]

    def _step_generators(self) -> list[Delta]:
        deltas = []
        for request_id, generation in self._stepped():
            try:
                advanced = generation.advance(self._vm, self._state)
            except Exception as exc:
                log.exception("request %s failed", request_id, extra=named(request_id))
                error = exc.info() if isinstance(exc, RequestError) else internal(exc)
                self._end(request_id, keep=False)
                deltas.append(generation.request.end(FinishReason.ERROR, error))
                continue
            if advanced is None:  # a unit of its prefill
                continue
            if not generation.looked_up:
                generation.looked_up = True
                self._count_lookup(generation)
            # A spoken request (worker/vision/talker.py) gives its text and audio as a list.
            for delta in advanced if isinstance(advanced, list) else [advanced]:
                if delta.finish_reason is None and getattr(generation, "joins", False):
                    delta = self._join(request_id, generation, delta)
                elif delta.finish_reason is not None:
                    self._end(request_id)
                deltas.append(delta)
        return deltas

    def _join(self, request_id: str, generation: VisionGeneration, delta: Delta) -> Delta:
        """A request past its first token goes on in the decode batch (if its cache can);
        `delta`, its first token's, or its end if joining failed."""
        assert self._batch is not None
        try:
            handed = generation.handoff()
            if handed is None:
                return delta  # it stays on its generator
            cache, offset = handed
            del self._active[request_id]
            self._offsets[request_id] = offset
            if generation.lease is not None:
                self._leases[request_id] = generation.lease
            hidden = generation.lookahead.hidden(generation.request.prompt_tokens)
            self._batch.join(generation.request, cache, hidden)
        except Exception as exc:
            log.exception(
                "request %s could not join the batch", request_id, extra=named(request_id)
            )
            self._active.pop(request_id, None)
            self._offsets.pop(request_id, None)
            self._leases.pop(request_id, None)
            generation.close()
            return generation.request.end(FinishReason.ERROR, internal(exc))
        return delta

    # -- KvKeeper: where the batch's ended requests' KV goes ---------------------------------

    def wants(self, request: TextRequest) -> bool:
        """Its conversation state (a request with images), or the text prefix cache (one of
        text only)."""
        if request.request_id in self._offsets:
            return request.request_id in self._leases
        return self._text_prefix.enabled

    def keep(self, request: TextRequest, tokens: list[int], cache: list[Any]) -> None:
        lease = self._leases.pop(request.request_id, None)
        if lease is not None:
            lease.state.update(tokens, cache)
            self.turns.give_back(lease)
        elif request.request_id not in self._offsets and self._text_prefix.enabled:
            self._text_prefix.store(tokens, cache)

    def _count_lookup(self, generation: VisionGeneration) -> None:
        """The first token came, so the prefill ran and mlx-vlm's cached tokens are known: one
        prefix-cache lookup, counted for requests that went through a cache (APC or turns)."""
        if self.stats is None:
            return
        if generation.lease is not None or generation.uses_apc:
            request = generation.request
            self.stats.count_prefix_cache(request.prompt_tokens, request.cached_tokens)

    def abort(self, request_ids: Iterable[str]) -> list[Delta]:
        ids = list(request_ids)
        deltas = [
            self._end(request_id).request.end(FinishReason.ABORT)
            for request_id in ids
            if request_id in self._active
        ]
        if self._batch is not None:
            deltas += self._batch.abort(ids)
            for request_id in ids:
                self._offsets.pop(request_id, None)
                self._leases.pop(request_id, None)
        return deltas
