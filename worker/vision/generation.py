"""One vision request on its own mlx-vlm generator (worker/vision/engine.py), advanced a unit at
a time: its prefill paced (worker/vision/paced.py), its tokens through its TextRequest, and,
where the model decodes in a batch, its hand-off to that batch at its first token
(worker/vision/batched.py). Runs on the MLX thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from protocol.messages import Delta, FinishReason
from worker.runtime.request_log import named
from worker.text.request import TextRequest
from worker.vision.batched import Lookahead, prompt_cache, rope_offset
from worker.vision.features import prefill_features
from worker.vision.model import VisionModel
from worker.vision.paced import PAUSED, StepRun
from worker.vision.prompt import VisionInputs
from worker.vision.turns import Lease

log = logging.getLogger(__name__)

# Attributes where mlx-vlm's Qwen-style language models keep per-generation rotary state.
_STATE_ATTRIBUTES = ("_rope_deltas", "_position_ids")


class ModelState:
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
        # What one unit of its prefill may take (None: no limit), set by the engine before
        # each advance (worker/vision/slicing.py).
        self.unit_seconds: float | None = None

    def advance(self, vm: VisionModel, state: ModelState) -> Delta | None:
        """Generates one token and returns its Delta; None: a unit of the prefill ran."""
        if self._results is None:
            self._state = state.fresh()
            self._results = StepRun(lambda: self._start(vm))
        self._results.budget.seconds = self.unit_seconds
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

    def _next(self, state: ModelState) -> Any:
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

    def _drain(self, state: ModelState) -> None:
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
