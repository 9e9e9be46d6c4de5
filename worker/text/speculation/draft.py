"""A draft model's proposals inside continuous batching: each sequence's greedy continuation.

Each sequence keeps a KV cache of the draft model of its own, and the tokens in it. To propose
k tokens after `tokens + [last]`, the draft cache is cut back to the longest prefix it shares
with that context (rejected proposals of the step before leave it ahead of the sequence),
the rest of the context is fed in one call, and k tokens are decoded greedily, one call each.
The k-th proposal is not fed: if it is accepted, the next step feeds it with the rest.

Greedy proposals are deterministic, which the verification's losslessness argument needs
(verify.py). Draft calls are per sequence (not batched across the rows): a draft is meant to
be small, and its calls run on the worker's MLX thread between the batch's steps.
"""

from __future__ import annotations

from typing import Any, cast

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

PREFILL_CHUNK = 2048  # context tokens fed to the draft per call


class DraftProposer:
    """Proposes with `draft_model` (mlx-lm, the main model's tokenizer)."""

    def __init__(self, draft_model: Any) -> None:
        self._model = draft_model
        self._caches: dict[int, list[Any]] = {}
        self._cached: dict[int, list[int]] = {}  # the tokens each draft cache holds

    def propose(
        self, uids: list[int], tokens: list[list[int]], last: list[int], lengths: list[int]
    ) -> list[list[int]]:
        return [
            self._propose_one(uid, [*seq, token], k) if k > 0 else []
            for uid, seq, token, k in zip(uids, tokens, last, lengths, strict=True)
        ]

    def forget(self, uid: int) -> None:
        self._caches.pop(uid, None)
        self._cached.pop(uid, None)

    def _propose_one(self, uid: int, context: list[int], k: int) -> list[int]:
        cache = self._caches.get(uid)
        if cache is None:
            cache = self._caches[uid] = make_prompt_cache(self._model)
            self._cached[uid] = []
        cached = self._cached[uid]
        shared = _shared_prefix(cached, context)
        if shared == len(context):  # never feed nothing: the last token's logits are needed
            shared -= 1
        if len(cached) > shared:
            trim_prompt_cache(cache, len(cached) - shared)
        pending = context[shared:]
        while len(pending) > PREFILL_CHUNK:  # a long prompt: in chunks, as a prefill
            self._model(mx.array([pending[:PREFILL_CHUNK]]), cache=cache)
            mx.eval([c.state for c in cache])
            pending = pending[PREFILL_CHUNK:]
        logits = self._model(mx.array([pending]), cache=cache)
        proposals = [_greedy(logits)]
        for _ in range(k - 1):
            logits = self._model(mx.array([[proposals[-1]]]), cache=cache)
            proposals.append(_greedy(logits))
        self._cached[uid] = context + proposals[:-1]
        return proposals


def _greedy(logits: mx.array) -> int:
    return cast(int, mx.argmax(logits[0, -1]).item())


def _shared_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
