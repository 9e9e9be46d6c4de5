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
generator to the end. Every step, each request still prefilling runs one unit, as the text
engine feeds every prefilling request a chunk a step; but while a streamed request is in the
batch (decoding, or waiting for its first token), only one of them does, in turn, so the
stream's decode step waits for one unit, not one of each, and the unit is cut to fit beside
the decode step: the engine times the batch's decode steps, and a unit may take `interleave`
of one (--prefill-interleave, default 0.7 as for text prompts: worker/text/prefill_pacing.py;
0 turns this pacing off: whole units, every prefilling request each step; the least units
until a step was timed), by which a language model's prefill chunk pauses before each decoder
layer and, on the CPU, a Qwen-VL vision block and merger run in slices of rows steered to that
time (worker/vision/slicing.py), the same floats as whole. (A client that does not stream sees
no token before the last: then every prefill goes on a whole unit a step, which ends a burst
of image requests sooner: the batch decodes fewer steps with few rows.) On the CPU a whole
Qwen-VL block runs its elementwise work on two streams (worker/vision/lanes.py), the same
floats. The request's own sampler and logits processors are used throughout, and every token
goes once through the same `TextRequest` the text engines use (EOS, max_tokens, stop strings,
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
import statistics
import time
from collections.abc import Iterable
from typing import Any

from protocol.inputs import ChatInputs, CompleteInputs, Op
from protocol.messages import Delta, FinishReason, Submit
from protocol.ready import Capability, TextInfo
from worker.runtime.errors import RequestError, internal
from worker.runtime.request_log import named
from worker.text.batch_engine import BatchTextEngine
from worker.text.prefill_pacing import DEFAULT_RATIO
from worker.text.prefix_reuse import PrefixReuse
from worker.text.request import TextRequest, make_text_request, terminal
from worker.text.settings import GenerationSettings
from worker.vision.batched import BatchedLanguageModel, BatchModel, batched
from worker.vision.features import CountingVisionCache
from worker.vision.generation import ModelState, VisionGeneration
from worker.vision.model import VisionModel
from worker.vision.paced import pace
from worker.vision.prompt import build_vision_inputs
from worker.vision.talker import TalkerGeneration, check_talker_request, talker_speakers
from worker.vision.turns import ConversationCache, Lease, media_key

log = logging.getLogger(__name__)

DECODE_STEPS_KEPT = 9  # timed decode steps whose median a unit of prefill is sized to

APC_BLOCK_SIZE = 16  # tokens per APC block (mlx-vlm's default)


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

    if not batched(vm):
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
        interleave: float = DEFAULT_RATIO,
    ) -> None:
        self._vm = vision_model
        self._interleave = interleave  # --prefill-interleave: a unit's share of a decode step
        pace(vision_model.model)
        # The decode batch (worker/vision/batched.py), where the model's family has one
        # (`decode_batch` False: none, every request on its own generator).
        self._batch: BatchTextEngine | None = None
        self._text_prefix = text_prefix or PrefixReuse(None)
        self._offsets: dict[str, int] = {}  # mRoPE offsets of the requests in the batch
        self._leases: dict[str, Lease] = {}  # their conversation states, by request id
        self._prefill_turn = 0  # which prefilling generator advances while the batch decodes
        # The batch's latest decode steps timed while pacing: (rows decoding, seconds).
        self._decode_times: list[tuple[int, float]] = []
        self._streamed: set[str] = set()  # the requests whose clients stream
        if decode_batch and batched(vision_model):
            self._batch = self._decode_batch(prefill_step_size, max_num_seqs)
        self._talker_max_frames = talker_max_frames
        self._prefill_step_size = prefill_step_size
        self.apc_manager = apc_manager
        self.vision_cache = vision_cache if vision_cache is not None else CountingVisionCache()
        self.turns = turns if turns is not None else ConversationCache(0)
        self._state = ModelState(vision_model.model)
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
        if submit.stream and self._batch is not None and self._interleave:
            self._streamed.add(submit.request_id)
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
        self._streamed.intersection_update(self.active_ids())
        # Decided before the batch steps: the step whose tokens end a stream sends them only
        # after its units of prefill, so they are chosen and cut as in the steps before.
        paced = self._batch is not None and self._paced(self._batch)
        unit_seconds = self._unit_seconds(paced)
        stepped = self._stepped(paced)
        if self._batch is not None and self._batch.active_ids():
            deltas = self._batch_step(self._batch, paced)
            for delta in deltas:
                if delta.finish_reason is not None:
                    self._offsets.pop(delta.request_id, None)
                    self._leases.pop(delta.request_id, None)  # (`keep` took the kept ones)
        return deltas + self._step_generators(stepped, unit_seconds)

    def _batch_step(self, batch: BatchTextEngine, paced: bool) -> list[Delta]:
        """One step of the decode batch; while prefills are `paced` against it, a decode-only
        step is timed to its end (the batch's stream waited for): the time a unit is cut to."""
        timed = paced and batch.decoding() == len(batch.active_ids())
        began = time.perf_counter()
        deltas = batch.step()
        if timed:
            batch.synchronize()
            took = (batch.decoding(), time.perf_counter() - began)
            self._decode_times = [*self._decode_times, took][-DECODE_STEPS_KEPT:]
        return deltas

    def _paced(self, batch: BatchTextEngine) -> bool:
        """Whether units of prefill are cut to fit beside the decode step (`interleave` on):
        a request prefills for the batch while a streamed one is in it (decoding, or waiting
        for its first token)."""
        return (
            bool(self._interleave)
            and any(rid in self._streamed for rid in batch.active_ids())
            and any(getattr(g, "joins", False) for g in self._active.values())
        )

    def _unit_seconds(self, paced: bool) -> float | None:
        """What a unit of prefill may take this step: `interleave` times a decode step while
        prefills are `paced` (the least units until a decode step was timed), else no limit."""
        batch = self._batch
        if batch is None or not paced:
            return None
        if not self._decode_times:
            return 0.0
        # The steps timed with as many rows decoding as now, else all of them (a stalled step
        # is rare: the median).
        rows = batch.decoding()
        times = [t for n, t in self._decode_times if n == rows] or [
            t for _, t in self._decode_times
        ]
        return self._interleave * statistics.median(times)

    def _stepped(self, paced: bool) -> list[tuple[str, Any]]:
        """The generators to advance this step: all of them, but while prefills are `paced`
        beside a streamed request only one of those still prefilling for the batch (in turn),
        so its decode step waits for one unit of prefill, not one of each request's."""
        active = list(self._active.items())
        if not paced:
            return active
        # (`paced` means some request prefills for the batch.)
        prefilling = [(rid, g) for rid, g in active if getattr(g, "joins", False)]
        self._prefill_turn = (self._prefill_turn + 1) % len(prefilling)
        chosen = prefilling[self._prefill_turn]
        return [(rid, g) for rid, g in active if not getattr(g, "joins", False) or g is chosen[1]]

    def _step_generators(
        self, stepped: list[tuple[str, Any]], unit_seconds: float | None
    ) -> list[Delta]:
        deltas = []
        for request_id, generation in stepped:
            if getattr(generation, "joins", False):
                generation.unit_seconds = unit_seconds
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
