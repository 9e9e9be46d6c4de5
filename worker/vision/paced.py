"""A vision request's prefill in bounded units: mlx-vlm's generator, paused before each unit.

`mlx_vlm.stream_generate` runs a request's whole prefill inside its first `next()`: the vision
tower on every picture, then the language model over the prompt in chunks of
`prefill_step_size` tokens. The worker's engines must do one bounded unit of work per step, so
that the other requests on the MLX thread (another vision request's tokens, a chat request
next to it) are not held for all of it. Rather than rewrite mlx-vlm's loop, each request's
generator runs in a `StepRun` (worker/runtime/paused_run.py, a greenlet on the same thread),
and the model's tower blocks and language model are given a class (`pace`) whose call first
hands the thread back when it is a unit of prefill: one block of the vision or audio tower (its
output evaluated there), or a language-model call over more than one token (a prefill chunk).
A decode step (one token) never pauses, so a request's decoding is one token a step as before.
The computation is mlx-vlm's own, call for call, except a Qwen-VL vision block on the CPU,
which runs in row slices (worker/vision/slicing.py) or with its elementwise work on two
streams (worker/vision/lanes.py), each the same floats as the block's call: a paced request's
tokens are exactly what `stream_generate` gives directly with the same `prefill_step_size`.

Outside a `StepRun` (a direct call of the library, Qwen3-Omni's talker) the classes are the
models' own. Each run keeps its own default MLX stream (mlx-vlm enters `mx.stream(...)` inside
the generator): it is put back when the run resumes and the caller's restored when it pauses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import mlx.core as mx
from mlx.utils import tree_flatten

from worker.runtime.paused_run import PausedRun
from worker.vision.lanes import laned, laned_block
from worker.vision.slicing import (
    SliceBudget,
    on_cpu,
    sliceable,
    sliced_block,
    sliced_merger,
    weight_widths,
)

PAUSED = object()  # what `StepRun.advance` returns when the run paused before a unit of prefill


class StepRun(PausedRun):
    """The items of the iterator `start()` returns, one `advance()` at a time; a paced module
    called inside pauses the run before its work (`advance` then returns `PAUSED`)."""

    def __init__(self, start: Callable[[], Iterator[Any]]) -> None:
        super().__init__(run=self._loop)
        self._start = start
        self.iterator: Iterator[Any] | None = None
        self._stream: Any = None  # the run's own default stream while it is switched out
        self.pauses = 0  # units of prefill begun
        self.cache: list[Any] | None = None  # the KV cache its language model calls carry
        # What a unit may take while a streamed request decodes beside it (None: no limit;
        # worker/vision/slicing.py), set by the engine; with it, a prefill call of the language
        # model pauses before each layer.
        self.budget = SliceBudget()
        # Inside a language model call paced layer by layer: what each layer calls first.
        self.layer_pause: Callable[[], None] | None = None

    def _loop(self) -> Any:
        self.iterator = self._start()
        for item in self.iterator:
            super().pause((item,))
        return None

    def pause(self, value: Any = PAUSED) -> None:
        """Called inside the run, before a unit of prefill: give the thread back."""
        self.pauses += 1
        super().pause(value)

    def wait(self) -> None:
        """Called inside the run while it waits for another run's work: give the thread
        back (`advance` returns `PAUSED`) without beginning a unit."""
        super().pause(PAUSED)

    def advance(self) -> Any:
        """Runs to the next item (returned as a 1-tuple), a pause (`PAUSED`) or the end (None,
        and `dead`); an exception of the work is raised here."""
        device = mx.default_device()
        outer = mx.default_stream(device)
        if self._stream is not None:
            mx.set_default_stream(self._stream)
        try:
            return self.resume()
        finally:
            self._stream = mx.default_stream(device)
            mx.set_default_stream(outer)

    def stop(self) -> None:
        """Ends the run where it is (a paused prefill's frames unwound) and closes its
        generator."""
        super().stop()  # started and paused: inside the work or the generator
        close = getattr(self.iterator, "close", None)
        if close is not None:
            close()


class _PausingTower:
    """Mixed in before a vision block's class (or the whole tower's, where its blocks are not
    found): every call is a unit of prefill, its output evaluated within it (MLX is lazy: left
    unevaluated, the work would run inside the next unit)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        run = StepRun.current()
        if run is None:
            return super().__call__(*args, **kwargs)  # type: ignore[misc]
        run.pause()
        return _evaluated(super().__call__, *args, **kwargs)  # type: ignore[misc]


class _SlicingBlock(_PausingTower):
    """A Qwen-VL vision block's `_PausingTower`: on the CPU, while its run has a budget, its
    rows in slices, each a unit (worker/vision/slicing.py), else the whole block with its
    elementwise work on two streams (worker/vision/lanes.py). Whether to slice is decided once
    the run resumes (the budget may have changed while it was paused)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        run = StepRun.current()
        inputs = _block_inputs(args, kwargs)
        if run is None or inputs is None or not on_cpu():
            return super().__call__(*args, **kwargs)
        run.pause()
        if run.budget.seconds is None:  # whole (this unit's pause was made), on both cores
            if laned(self):
                return _evaluated(laned_block, self, *inputs)
            return _evaluated(super(_PausingTower, self).__call__, *args, **kwargs)  # type: ignore[misc]
        return sliced_block(self, run.budget, _after_first(run.pause), *inputs)


class _SlicingMerger:
    """Mixed in before a Qwen-VL merger's class: inside a run, on the CPU, a unit, or while
    the run has a budget its groups of rows in slices, each a unit."""

    def __call__(self, x: mx.array) -> Any:
        run = StepRun.current()
        if run is None or not on_cpu():
            return super().__call__(x)  # type: ignore[misc]
        run.pause()
        merge = super().__call__  # type: ignore[misc]
        if run.budget.seconds is None:
            return _evaluated(merge, x)
        merged = self.hidden_size  # type: ignore[attr-defined]
        widths = weight_widths(self)
        return sliced_merger(merge, merged, widths, run.budget, _after_first(run.pause), x)


class _PausingLanguageModel:
    """Mixed in before a language model's class: a call over more than one token is a unit
    of prefill (a chunk; mlx-vlm evaluates each chunk's cache itself), or, while its run has a
    budget, one unit per decoder layer (`_PausingLayer`); a decode step is not. The run keeps
    the KV cache the calls carry (a request that goes on in the decode batch takes it along:
    worker/vision/batched.py)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        run = StepRun.current()
        if run is not None:
            run.cache = kwargs.get("cache", run.cache)
        if run is None or _tokens(args, kwargs) <= 1:
            return super().__call__(*args, **kwargs)  # type: ignore[misc]
        run.pause()
        layers = _decoder_layers(self)
        if run.budget.seconds is None or not layers or not isinstance(layers[0], _PausingLayer):
            return super().__call__(*args, **kwargs)  # type: ignore[misc]
        run.layer_pause = _after_first(run.pause)
        try:
            return super().__call__(*args, **kwargs)  # type: ignore[misc]
        finally:
            run.layer_pause = None


class _PausingLayer:
    """Mixed in before a decoder layer's class: inside a call its run paces layer by layer,
    each call is a unit, its output evaluated within it. The computation is the layer's own, so
    a chunk paced so is the same floats as in one call."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        run = StepRun.current()
        if run is None or run.layer_pause is None:
            return super().__call__(*args, **kwargs)  # type: ignore[misc]
        run.layer_pause()
        return _evaluated(super().__call__, *args, **kwargs)  # type: ignore[misc]


def _after_first(pause: Callable[[], None]) -> Callable[[], None]:
    """`pause`, but not the first time: for work cut into units after the run paused for it."""
    calls = 0

    def paused() -> None:
        nonlocal calls
        calls += 1
        if calls > 1:
            pause()

    return paused


_BLOCK_ARGUMENTS = ("hidden_states", "cu_seqlens", "rotary_pos_emb")


def _block_inputs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """A Qwen-VL block call's (hidden_states, cu_seqlens, rotary_pos_emb); None when it was
    called otherwise."""
    bound = dict(zip(_BLOCK_ARGUMENTS, args, strict=False))
    if len(args) > len(_BLOCK_ARGUMENTS) or bound.keys() & kwargs.keys():
        return None
    bound.update(kwargs)
    if set(bound) != set(_BLOCK_ARGUMENTS):
        return None
    return tuple(bound[name] for name in _BLOCK_ARGUMENTS)


def _decoder_layers(language_model: Any) -> list[Any]:
    layers = getattr(language_model, "layers", None)
    if layers is None:
        layers = getattr(getattr(language_model, "model", None), "layers", None)
    return layers if isinstance(layers, list) else []


def _evaluated(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`call(*args, **kwargs)` with its arrays evaluated (MLX is lazy: left unevaluated, the
    work would run inside the next unit)."""
    out = call(*args, **kwargs)
    mx.eval([leaf for _, leaf in list(tree_flatten(out)) if isinstance(leaf, mx.array)])
    return out


def _tokens(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    embeds = kwargs.get("inputs_embeds")
    inputs = embeds if embeds is not None else kwargs.get("inputs", args[0] if args else None)
    shape: tuple[int, ...] = tuple(getattr(inputs, "shape", ()))
    return int(shape[1]) if len(shape) > 1 else 1


# Where mlx-vlm's towers keep their transformer blocks: Qwen2-VL, Qwen2.5-VL, Qwen3-VL
# (`blocks`); Gemma 3's SigLIP (`vision_model.encoder.layers`); Qwen3-Omni's audio encoder
# (`layers`).
_BLOCK_PATHS = (
    ("blocks",), ("vision_model", "encoder", "layers"), ("encoder", "layers"), ("layers",),
)  # fmt: skip
# Where the towers and the language model are: on the model, or (Qwen3-Omni) on its thinker.
_TOWERS = ("vision_tower", "audio_tower")
_PACED_CLASSES: dict[tuple[type, type], type] = {}


def _tower_units(tower: Any) -> list[Any]:
    """The modules whose calls are a tower's units: its blocks, else itself."""
    for path in _BLOCK_PATHS:
        found = tower
        for name in path:
            found = getattr(found, name, None)
        if isinstance(found, list) and found:
            return found
    return [tower]


def _mix(module: Any, mixin: type) -> None:
    """Gives `module` the class `mixin` + its own (one such class per pair, shared)."""
    if not isinstance(module, mixin):
        cls = type(module)
        paced = _PACED_CLASSES.get((mixin, cls))
        if paced is None:
            paced = _PACED_CLASSES[(mixin, cls)] = type(f"Paced{cls.__name__}", (mixin, cls), {})
        module.__class__ = paced


def pace(model: Any) -> None:
    """Gives `model`'s tower blocks (vision and audio), Qwen-VL mergers, language model and its
    decoder layers their pausing classes (once); Qwen3-Omni's are its thinker's."""
    thinker = getattr(model, "thinker", None)
    owner = model if thinker is None else thinker
    for name in _TOWERS:
        tower = getattr(owner, name, None)
        if tower is None:
            continue
        for unit in _tower_units(tower):
            _mix(
                unit, _SlicingBlock if sliceable(unit) and hasattr(unit, "attn") else _PausingTower
            )
        mergers = [getattr(tower, "merger", None), *getattr(tower, "deepstack_merger_list", [])]
        for merger in mergers:
            if merger is not None and sliceable(merger) and hasattr(merger, "hidden_size"):
                _mix(merger, _SlicingMerger)
    language_model = getattr(owner, "language_model", None)
    if language_model is not None:
        _mix(language_model, _PausingLanguageModel)
        for layer in _decoder_layers(language_model):
            _mix(layer, _PausingLayer)
