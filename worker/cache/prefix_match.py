"""Which stored token prefix a prompt can reuse, shared by the memory and the SSD cache tiers.

Both tiers index their entries in mlx-lm's `PromptTrie` (keyed by model) and ask the same
question: given a prompt, which stored entry saves the most prefill, and how many of its tokens
are kept? The answer must leave at least one prompt token to prefill (the model has to compute
the logits of the last prompt token), and may cut a stored entry short only when its cache can
be trimmed (a rotating / sliding-window cache that has wrapped around cannot).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx.utils import tree_flatten
from mlx_lm.models.cache import CacheList, PromptTrie, RotatingKVCache

Tokens = tuple[int, ...]


@dataclass(frozen=True)
class Reuse:
    """A stored entry (`entry`, its full token sequence) of which the first `length` tokens
    are reused; `length < len(entry)` means the entry's cache must be trimmed by the rest."""

    entry: Tokens
    length: int

    @property
    def trim(self) -> int:
        return len(self.entry) - self.length


def find_reuse(
    trie: PromptTrie, model_key: str, tokens: Sequence[int], trimmable: Callable[[Tokens], bool]
) -> Reuse | None:
    """The best reuse of the entries in `trie` for the prompt `tokens`, or None.

    Searches `tokens[:-1]` rather than `tokens`: the last prompt token is never served from a
    cache, so an exact entry for the whole prompt is reused only by trimming one token.
    Prefers an entry sharing a longer common prefix if it can be trimmed to it, else the
    longest stored entry that is itself a prefix (reused whole, no trimming needed).
    """
    query = list(tokens[:-1])
    if not query:
        return None
    found = trie.search(model_key, query)
    if found.exact is not None:
        return Reuse(tuple(query), len(query))
    shorter = len(found.shorter) if found.shorter is not None else 0
    if found.longer is not None and found.common_prefix > shorter:
        longer = tuple(found.longer)
        if trimmable(longer):
            return Reuse(longer, found.common_prefix)
    if shorter:
        return Reuse(tuple(found.shorter), shorter)
    return None


def pop_prefixes(trie: PromptTrie, model_key: str, tokens: Sequence[int]) -> list[Tokens]:
    """Removes from `trie` and returns the stored entries that are strict prefixes of `tokens`
    (unlike `PromptTrie.pop_prefixes`, `tokens` need not be stored itself)."""
    popped = []
    query = list(tokens[:-1])
    while query:
        found = trie.search(model_key, query)
        prefix = found.exact if found.exact is not None else found.shorter
        if not prefix:
            break
        trie.pop(model_key, list(prefix))
        popped.append(tuple(prefix))
        query = list(prefix[:-1])
    return popped


def covered_tokens(cache: Sequence[Any]) -> int | None:
    """How many tokens the cache has processed, as its layers' `offset` says; None when no
    layer says (e.g. recurrent-state caches) or the layers disagree."""
    offsets = {layer.offset for layer in cache if type(getattr(layer, "offset", None)) is int}
    return offsets.pop() if len(offsets) == 1 else None


def cache_nbytes(cache: Sequence[Any]) -> int:
    """Bytes held by a per-layer cache: the sum of `nbytes` of every array in its state."""
    leaves = tree_flatten([c.state for c in cache])
    return sum(v.nbytes for _, v in leaves if isinstance(v, mx.array))


def continues_exactly(cache: Sequence[Any]) -> bool:
    """Whether prefilling more tokens into `cache` computes what one cold prefill would.

    False once a `RotatingKVCache` with `keep > 0` (what `make_prompt_cache(max_kv_size=...)`
    builds) has wrapped around: it then keeps its first `keep` tokens visible to later chunks
    while a cold prefill's sliding window hides them, so the logits differ (measured: greedy
    tokens diverge). Sliding-window models' own caches use `keep=0` and continue exactly.
    """
    for layer in cache:
        if isinstance(layer, CacheList) and not continues_exactly(layer.caches):
            return False
        if isinstance(layer, RotatingKVCache) and layer.keep > 0 and not layer.is_trimmable():
            return False
    return True
