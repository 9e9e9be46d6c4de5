"""Continuing a conversation about images: its KV cache, kept per set of images.

mlx-vlm's block prefix cache (APC) never reuses a prefix that holds image tokens, so every turn
of a chat about a picture would prefill the whole conversation again. mlx-vlm's other reuse path,
`stream_generate(..., prompt_cache_state=state)`, does reuse it: the state holds one KV cache and
its token ids; when a new prompt starts with part of those ids and the rest is text only (every
image of the new prompt lies in the reused part), mlx-vlm trims the cache to the common prefix,
primes the model's mRoPE state from the whole prompt and prefills only the suffix; when the
generator runs to its end it stores the new ids and cache in the state.

`ConversationCache` keeps such states, keyed by the request's images (sha256 of their encoded
bytes, in order), so prompts with other images never share KV. A request takes the state of
its key whose ids share the longest prefix with its prompt, out of the pool (requests never
share a state: mlx-vlm trims and extends its cache in place), and gives it back at its end. Only
an updated state goes back: by mlx-vlm when its generator ran to EOS or max_tokens (after a stop
string, an abort or an error there its cache no longer matches its ids, and it is dropped), or
by the engine when the request decoded in the batch (worker/vision/batched.py: its KV cut to
the tokens it returned, however it ended but by an error). Bounded by
a byte budget, least recently used first out. Runs on the MLX thread only.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import count
from typing import Any


def media_key(images: Sequence[bytes]) -> str:
    """The key of a request's images: sha256 over each file's digest, in order."""
    digest = hashlib.sha256()
    for data in images:
        digest.update(hashlib.sha256(data).digest())
    return digest.hexdigest()


def _cache_bytes(cache: Sequence[Any] | None) -> int:
    return sum(int(getattr(c, "nbytes", 0) or 0) for c in cache or ())


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


@dataclass
class Lease:
    """A state taken for one request; `ids_before` tells whether mlx-vlm updated it."""

    key: str
    state: Any  # mlx_vlm's PromptCacheState
    ids_before: list[int] | None = field(default=None)

    @property
    def updated(self) -> bool:
        return self.state.token_ids is not self.ids_before and self.state.cache is not None


class ConversationCache:
    """States by image set, under a byte budget; see the module docstring."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._entries: OrderedDict[int, tuple[str, Any, int]] = (
            OrderedDict()
        )  # id -> key, state, bytes
        self._ids = count()
        self.hits = 0  # leases of a state that already held a cache for the key

    @property
    def enabled(self) -> bool:
        return self.budget_bytes > 0

    @property
    def nbytes(self) -> int:
        return sum(size for _, _, size in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def take(self, key: str, prompt: Sequence[int]) -> Lease:
        """The state of `key` sharing the longest prefix with `prompt` (a fresh one if none)."""
        from mlx_vlm.generate.common import PromptCacheState

        best, best_len = None, 0
        for entry_id, (entry_key, state, _) in self._entries.items():
            if entry_key == key:
                shared = _common_prefix(state.token_ids or [], prompt)
                if shared > best_len:
                    best, best_len = entry_id, shared
        if best is None:
            return Lease(key, PromptCacheState())
        _, state, _ = self._entries.pop(best)
        self.hits += 1
        return Lease(key, state, state.token_ids)

    def give_back(self, lease: Lease) -> None:
        """Keeps the lease's state if mlx-vlm updated it (see the module docstring)."""
        if not lease.updated:
            return
        size = _cache_bytes(lease.state.cache)
        if size > self.budget_bytes:
            return
        self._entries[next(self._ids)] = (lease.key, lease.state, size)
        while self.nbytes > self.budget_bytes:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()
