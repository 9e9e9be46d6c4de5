"""Splitting an mlx-lm model across the group: tensor parallel (`Model.shard`) or pipeline
parallel (`Model.model.pipeline`), whichever the architecture has in mlx-lm.

`auto` picks tensor parallelism where the architecture has it (every rank holds a slice of
every layer: the KV cache and the weights split evenly; two `all_sum`s per layer a token) and
pipeline parallelism otherwise (each rank holds whole layers: one hand-off per rank a token).
An architecture with neither, or one that cannot split into this many parts (tensor
parallelism needs the attention and KV heads divisible by the group size), is refused with
an error naming it.
"""

from __future__ import annotations

from typing import Any

from protocol.launch.parallel_modes import PARALLEL_MODES


class ShardingError(ValueError):
    """The model cannot be split the way the arguments ask."""


def supported_modes(model: Any) -> list[str]:
    modes = []
    if hasattr(model, "shard"):
        modes.append("tensor")
    if hasattr(getattr(model, "model", None), "pipeline"):
        modes.append("pipeline")
    return modes


def choose_mode(model: Any, requested: str, model_type: str) -> str:
    """The mode to use for `model` (an mlx-lm Model, before its weights are materialized)."""
    if requested not in PARALLEL_MODES:
        raise ShardingError(f"unknown parallel mode {requested!r} ({', '.join(PARALLEL_MODES)})")
    modes = supported_modes(model)
    if not modes:
        raise ShardingError(
            f"mlx-lm cannot split a {model_type!r} model across processes (it has neither "
            "tensor nor pipeline parallelism for this architecture)"
        )
    if requested == "auto":
        return modes[0]
    if requested not in modes:
        raise ShardingError(
            f"mlx-lm has no {requested} parallelism for {model_type!r} models "
            f"(it has: {', '.join(modes)})"
        )
    return requested


def check_tensor_split(config: dict[str, Any], size: int) -> None:
    """Tensor parallelism splits heads: their counts must divide by the group size."""
    text = config.get("text_config") or config
    for key in ("num_attention_heads", "num_key_value_heads"):
        heads = text.get(key)
        if isinstance(heads, int) and heads % size:
            raise ShardingError(
                f"tensor parallelism over {size} ranks needs {key} ({heads}) divisible by {size}"
                "; give --parallel pipeline or another number of ranks"
            )


def shard_model(model: Any, group: Any, mode: str, config: dict[str, Any]) -> None:
    """Splits `model` in place across `group` (an mx.distributed.Group) by `mode`."""
    if mode == "tensor":
        check_tensor_split(config, group.size())
        model.shard(group)
    else:
        layers = len(model.model.layers)
        if layers < group.size():
            raise ShardingError(
                f"pipeline parallelism over {group.size()} ranks needs as many layers "
                f"(the model has {layers})"
            )
        model.model.pipeline(group)


class Sharder:
    """`load_text_model`'s `shard` for one rank: splits the model, then says what the rank's
    share of a byte budget over every layer's KV cache is (`local_bytes`)."""

    def __init__(self, group: Any, requested: str) -> None:
        self.group = group
        self.requested = requested
        self.mode: str | None = None
        self._layers = (1, 1)  # (this rank's layers, all layers)

    def __call__(self, model: Any, config: dict[str, Any]) -> None:
        model_type = str(config.get("model_type", type(model).__module__))
        self.mode = choose_mode(model, self.requested, model_type)
        total = len(model.model.layers) if hasattr(model, "model") else 1
        shard_model(model, self.group, self.mode, config)
        if self.mode == "pipeline":
            inner = model.model
            self._layers = (inner.end_idx - inner.start_idx, total)

    def local_bytes(self, budget: int) -> int:
        """This rank's share of `budget`, in the proportion its KV caches have to the whole
        model's: a tensor-parallel rank holds 1/size of every layer's KV, a pipeline rank the KV
        of its own layers. An entry then costs every rank the same fraction of its budget, so
        the ranks' prefix caches keep and evict the same entries (layers with KV of one shape
        assumed, as in every architecture mlx-lm splits)."""
        mine, total = self._layers
        if self.mode == "tensor":
            return budget // self.group.size()
        return budget * mine // total
