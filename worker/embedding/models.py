"""Loading an embedding model and running one padded pass: token states per row.

Encoders load with mlx-embeddings (`mlx_embeddings.utils.load`: its model classes, its
weight sanitizing, the checkpoint's Hugging Face tokenizer) and run bidirectionally with the
padding masked out (`last_hidden_state` of `model(input_ids, attention_mask=mask)`). Decoders
load with mlx-lm and run their backbone (`model.model`, the states after the final norm) with
the causal mask: rows are right-padded, so a real token never attends to padding and needs no
mask of its own. Both hand back the states and the pooling (worker/embedding/pooling.py)
makes the vectors. Runs on the MLX thread only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from worker.embedding.checkpoint import DECODER, EmbeddingCheckpoint, read_checkpoint
from worker.embedding.pooling import normalize, pool


@dataclass
class EmbeddingModel:
    checkpoint: EmbeddingCheckpoint
    model: Any  # nn.Module
    tokenizer: Any  # the Hugging Face tokenizer
    dimensions: int
    pad_id: int

    def embed(self, rows: list[list[int]]) -> mx.array:
        """(len(rows), dimensions) float32 vectors of one pass, pooled (and normalised) as
        the checkpoint says; rows are padded to the longest with the tokenizer's pad id."""
        width = max(len(r) for r in rows)
        ids = mx.array([r + [self.pad_id] * (width - len(r)) for r in rows], dtype=mx.int32)
        mask = mx.array([[1] * len(r) + [0] * (width - len(r)) for r in rows], dtype=mx.int32)
        hidden = self._states(ids, mask)
        vectors = pool(hidden, mask, self.checkpoint.pooling)
        return normalize(vectors) if self.checkpoint.normalize else vectors

    def _states(self, ids: mx.array, mask: mx.array) -> mx.array:
        if self.checkpoint.backend == DECODER:
            return self.model.model(ids)
        return self.model(ids, attention_mask=mask).last_hidden_state


def load_embedding_model(path: str) -> EmbeddingModel:
    """Loads the checkpoint at `path` with the library its backend names; raises on failure."""
    checkpoint = read_checkpoint(path)
    if checkpoint.backend == DECODER:
        from mlx_lm import load

        model, wrapper = load(path)
        if not hasattr(model, "model"):
            raise ValueError(f"{path}: the mlx-lm model has no backbone (`model.model`) to pool")
    else:
        try:
            from mlx_embeddings.utils import load
        except ImportError as exc:
            raise ValueError(
                f"{path} is an encoder: install the [embed] extra (mlx-embeddings)"
            ) from exc
        model, wrapper = load(path)
    tokenizer = getattr(wrapper, "_tokenizer", wrapper)
    pad_id = tokenizer.pad_token_id
    if pad_id is None:
        pad_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    probe = EmbeddingModel(checkpoint, model, tokenizer, 0, int(pad_id))
    vector = probe.embed([[int(pad_id)]])  # one tiny pass: the width, and MLX warmed up
    mx.eval(vector)
    probe.dimensions = int(vector.shape[-1])
    return probe
