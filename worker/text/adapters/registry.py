"""The adapters loaded on one served text model: names, slots, layers, and each call's rows.

Loading an adapter reads and checks its files (files.py), then wraps each linear layer it
adapts in an `AdaptedLinear` (once; a layer stays wrapped) and gives the adapter a slot: a small
integer no other adapter ever gets, so a request admitted under an adapter keeps its slot even if
a later adapter takes its name. Unloading takes the name away at once (new requests cannot use
it) and frees the weights once no running request holds the slot (`collect`, called by the
engines with the slots their requests hold). The engines wrap every model call in
`selecting(slots)`, one slot per row of the call, so every adapted layer adds each row's own
adapter (layer.py). Everything here runs on the worker's MLX thread.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_unflatten

from worker.runtime.errors import bad_request
from worker.text.adapters.files import AdapterError, AdapterFiles, read_adapter
from worker.text.adapters.layer import AdaptedLinear, Routing, dimensions

log = logging.getLogger(__name__)

BASE = 0  # the slot of a request without an adapter


class Adapters:
    """Adapters served on `model`, at most `max_loras` at once."""

    def __init__(self, model: nn.Module, max_loras: int = 8, mixes_rows: bool = True) -> None:
        self._model = model
        self.max_loras = max_loras
        # Whether a model call may hold rows of different adapters (the batch engine); then a
        # new adapter is probed for layers that cannot keep its rows apart.
        self.mixes_rows = mixes_rows
        self.routing = Routing()
        self._slots: dict[str, int] = {}  # name -> slot of the loaded adapters
        self._paths: dict[int, str] = {}
        self._unloaded: set[int] = set()  # slots whose name is gone, weights not yet freed
        self._layers: dict[str, AdaptedLinear] = {}  # module path -> its wrapped layer
        self._next_slot = 1

    def loaded(self) -> list[tuple[str, str]]:
        """(name, path) of every loaded adapter, in loading order."""
        return [(name, self._paths[slot]) for name, slot in self._slots.items()]

    def slot(self, name: str) -> int | None:
        return self._slots.get(name)

    @property
    def weighted(self) -> bool:
        """Whether any adapter's weights are in the layers (loaded, or unloaded and still held):
        without, no model call needs its rows' adapters."""
        return bool(self._paths)

    @property
    def pending(self) -> bool:
        """Whether unloaded adapters still wait for their requests to end."""
        return bool(self._unloaded)

    def load(self, name: str, path: str, replace: bool = False) -> None:
        """Loads the adapter at `path` as `name`; AdapterError (nothing changed) when it cannot.
        `replace`: a loaded adapter of that name gives way to it in one step (its requests
        running finish under the old one)."""
        previous = self._slots.get(name)
        if previous is not None and not replace:
            raise AdapterError(f"an adapter named {name!r} is loaded already; unload it first")
        if previous is None and len(self._slots) >= self.max_loras:
            raise AdapterError(
                f"{len(self._slots)} adapters are loaded, the most this server holds "
                "(--max-loras); unload one first"
            )
        files = read_adapter(path)
        targets = self._targets(files)
        mx.eval([pair for pair in files.layers.values()])
        slot = self._next_slot
        self._next_slot += 1
        for module, (a, b) in files.layers.items():
            layer = self._layers.get(module) or self._wrap(module, targets[module])
            layer.add(slot, a, b, files.scale)
        self._paths[slot] = files.path
        try:
            if self.mixes_rows:
                self._probe(slot)
        except Exception as exc:
            for layer in self._layers.values():  # only the new slot: others may be in use
                layer.drop(slot)
            self._paths.pop(slot, None)
            raise AdapterError(
                f"the adapter {path!r} cannot be served per request on this model: {exc}"
            ) from None
        self._slots[name] = slot
        if previous is not None:
            self._unloaded.add(previous)  # freed by `collect` once its requests end
        log.info("loaded the LoRA adapter %s from %s (%d layers)", name, path, len(files.layers))

    def _probe(self, slot: int) -> None:
        """One tiny call with a row under the adapter beside a base row must equal each row
        run alone: every adapted layer must keep the rows apart (a layer that flattens or
        transposes its rows first cannot)."""
        tokens = mx.array([[1, 2, 3], [4, 5, 6]])
        with self.selecting([slot, BASE]):
            mixed = self._model(tokens)
        with self.selecting([slot]):
            alone = self._model(tokens[:1])
        with self.selecting([BASE]):
            base = self._model(tokens[1:])
        apart = mx.concatenate([alone, base]).astype(mx.float32)
        if not mx.allclose(mixed.astype(mx.float32), apart, rtol=1e-3, atol=1e-3).item():
            raise ValueError("a row's output changes with the other rows' adapters")

    def unload(self, name: str) -> None:
        """Takes `name` away; its weights go at a `collect` once no request holds its slot."""
        slot = self._slots.pop(name, None)
        if slot is None:
            raise KeyError(name)
        self._unloaded.add(slot)
        log.info("unloaded the LoRA adapter %s", name)

    def collect(self, in_use: Iterable[int]) -> None:
        """Frees the weights of unloaded adapters no request in `in_use` holds any more."""
        if not self._unloaded:
            return
        held = set(in_use)
        for slot in [s for s in self._unloaded if s not in held]:
            for layer in self._layers.values():
                layer.drop(slot)
            self._unloaded.discard(slot)
            self._paths.pop(slot, None)

    @contextlib.contextmanager
    def selecting(self, slots: list[int]) -> Iterator[None]:
        """Model calls built inside use `slots[i]`'s adapter for row i."""
        self.routing.use(slots)
        try:
            yield
        finally:
            self.routing.reset()

    def _targets(self, files: AdapterFiles) -> dict[str, Any]:
        """Each adapted module of the model, checked against the adapter's shapes."""
        modules = dict(self._model.named_modules())
        targets = {}
        for module, (a, b) in files.layers.items():
            layer = modules.get(module)
            dims = dimensions(layer) if layer is not None else None
            if dims is None:
                raise AdapterError(
                    f"the adapter {files.path!r} adapts {module!r}, which is not a linear "
                    "layer of this model"
                )
            if (a.shape[0], b.shape[1]) != dims:
                raise AdapterError(
                    f"the adapter {files.path!r}'s {module!r} maps {a.shape[0]} -> {b.shape[1]} "
                    f"features, the model's layer {dims[0]} -> {dims[1]}: it was trained on "
                    "another base model"
                )
            targets[module] = layer
        return targets

    def _wrap(self, module: str, layer: Any) -> AdaptedLinear:
        wrapped = AdaptedLinear(layer, self.routing)
        self._model.update_modules(tree_unflatten([(module, wrapped)]))
        self._layers[module] = wrapped
        return wrapped


def slot_for(adapters: Adapters | None, name: str | None) -> int:
    """The slot of a request's adapter `name` (BASE for none); a RequestError when no adapter
    of that name is loaded (unloaded since the gateway checked it)."""
    if name is None:
        return BASE
    slot = adapters.slot(name) if adapters is not None else None
    if slot is None:
        raise bad_request(f"the LoRA adapter {name!r} is not loaded")
    return slot


class AdaptedModel:
    """Stands in for the model where one request runs alone (the batch-1 engine): every call
    uses that request's adapter."""

    def __init__(self, model: nn.Module, adapters: Adapters, slot: int) -> None:
        self._model = model
        self._adapters = adapters
        self._slot = slot

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._adapters.selecting([self._slot]):
            return self._model(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)
