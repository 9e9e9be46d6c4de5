"""Qwen3-TTS's code predictor step under `mx.compile`: one traced graph per step of a frame.

Every codec frame, mlx-audio's Qwen3-TTS generator runs the code predictor (a small
transformer with a head per code group) 15 times, each step a few dozen small operations
(projections, norms, rotary, attention over the frame's few positions, SwiGLU): on a GPU,
kernel launches; on the CPU, an op dispatch each. The shapes of step `k` are the same in every
frame (2 input positions at step 0, 1 after; a cache of `k + 1` positions in a buffer of
mlx-lm's fixed 256), so each step is traced once and replayed as one compiled graph
(element-wise chains fused) for the rest of the model's life.

`install(model)` puts a `CompiledCodePredictor` in front of `model.talker.code_predictor`
(an attribute stand-in: the module tree, its weights and everything else on the predictor are
untouched). A call it does not recognise (explicit positions or a mask, no cache, another
cache type, a step at another offset or length than in a frame) goes to the module as it is.
The compiled step is the module's own call, traced: the same operations on the same inputs; on the CPU its logits are bit for bit the stock ones
(tests/unit/test_speech_qwen3_compiled.py, and the speech tests' equality with mlx-audio, whose
references run without it: `uninstalled`). Where a backend's fused kernels could round
differently, `VOMLX_SPEECH_COMPILE=0` serves the stock step.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import mlx.core as mx


def _cache_class() -> Any:
    from mlx_audio.lm.models.cache import KVCache

    return KVCache


class CompiledCodePredictor:
    """Stands in for a Qwen3-TTS talker's code predictor (see the module docstring)."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self._steps: dict[tuple[int, int], Callable[..., list[mx.array]]] = {}

    def __call__(
        self,
        inputs_embeds: mx.array,
        position_ids: Any = None,
        mask: Any = None,
        cache: list[Any] | None = None,
        generation_step: int = 0,
    ) -> tuple[mx.array, list[Any] | None, int]:
        compilable = self._compilable(position_ids, mask, cache)
        if not compilable or not self._in_frame(inputs_embeds, cache or [], generation_step):
            return self._real(inputs_embeds, position_ids, mask, cache, generation_step)
        assert cache is not None
        offset = cache[0].offset
        step = self._steps.get((generation_step, offset))
        if step is None:
            step = mx.compile(self._traced(generation_step, offset, len(cache)))
            self._steps[(generation_step, offset)] = step
        buffers = [] if offset == 0 else [a for c in cache for a in (c.keys, c.values)]
        out = step(inputs_embeds, *buffers)
        for i, layer_cache in enumerate(cache):
            layer_cache.keys, layer_cache.values = out[1 + 2 * i], out[2 + 2 * i]
            layer_cache.offset = offset + inputs_embeds.shape[1]
        return out[0], cache, generation_step + 1

    def _compilable(self, position_ids: Any, mask: Any, cache: list[Any] | None) -> bool:
        if position_ids is not None or mask is not None or not cache:
            return False
        kv_cache = _cache_class()
        if any(type(c) is not kv_cache for c in cache):
            return False
        offset = cache[0].offset
        if any(c.offset != offset for c in cache):
            return False
        # A cache at offset 0 has no buffer yet (mlx-audio resets it to None each frame).
        return all((c.keys is None) == (offset == 0) for c in cache)

    @staticmethod
    def _in_frame(inputs_embeds: mx.array, cache: list[Any], generation_step: int) -> bool:
        """A step as mlx-audio makes them in a frame: step 0 from an empty cache with two
        positions, step k > 0 after k + 1 positions with one (any other call goes as it is,
        so the traces stay one per step)."""
        if generation_step == 0:
            return cache[0].offset == 0 and inputs_embeds.shape[1] == 2
        return cache[0].offset == generation_step + 1 and inputs_embeds.shape[1] == 1

    def _traced(self, generation_step: int, offset: int, layers: int) -> Callable[..., Any]:
        """The predictor's call at one step as a function of arrays only: the input, then the
        layers' key and value buffers (none at offset 0); returns the logits and the buffers
        after the step."""
        real, kv_cache = self._real, _cache_class()

        def step(inputs_embeds: mx.array, *buffers: mx.array) -> list[mx.array]:
            cache = []
            for i in range(layers):
                layer_cache = kv_cache()
                if buffers:
                    layer_cache.keys, layer_cache.values = buffers[2 * i], buffers[2 * i + 1]
                    layer_cache.offset = offset
                cache.append(layer_cache)
            logits, _, _ = real(inputs_embeds, cache=cache, generation_step=generation_step)
            return [logits, *(a for c in cache for a in (c.keys, c.values))]

        return step

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def enabled() -> bool:
    return os.environ.get("VOMLX_SPEECH_COMPILE", "1") != "0"


def install(model: Any) -> None:
    """The compiled step in front of the model's code predictor (once; see `enabled`)."""
    talker = getattr(model, "talker", None)
    if talker is None or not enabled():
        return
    if isinstance(vars(talker).get("code_predictor"), CompiledCodePredictor):
        return
    object.__setattr__(talker, "code_predictor", CompiledCodePredictor(talker.code_predictor))


@contextlib.contextmanager
def uninstalled(model: Any) -> Iterator[None]:
    """While inside, the model's code predictor is mlx-audio's own (the references' call)."""
    stand_in = vars(model.talker).get("code_predictor")
    if not isinstance(stand_in, CompiledCodePredictor):
        yield
        return
    object.__delattr__(model.talker, "code_predictor")
    try:
        yield
    finally:
        object.__setattr__(model.talker, "code_predictor", stand_in)
