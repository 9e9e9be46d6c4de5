"""Prefix cache: KV caches of earlier prompts, reused by later prompts that start the same way.

A continued conversation (or any prompt sharing a prefix with an earlier one) then prefills only
its new suffix. Entries live in memory under a byte budget and, with an `SsdCacheTier`, on disk.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mlx.core as mx
import mlx_lm
from mlx_lm.models.cache import PromptTrie, can_trim_prompt_cache, trim_prompt_cache

from worker.cache.prefix_match import (
    Reuse,
    Tokens,
    cache_nbytes,
    continues_exactly,
    covered_tokens,
    find_reuse,
    pop_prefixes,
)

if TYPE_CHECKING:
    from worker.cache.ssd_cache import SsdCacheTier

log = logging.getLogger(__name__)

_COUNTERS = ("hits", "misses", "tokens_reused", "evictions", "refused", "inexact", "mismatched")


@dataclass
class _Entry:
    cache: list[Any]
    nbytes: int
    trimmable: bool


class PrefixCache:
    """Token-prefix trie of per-layer KV caches (mlx-lm cache objects), LRU under a byte budget.

    Invariants:
    - An entry's cache covers exactly its token sequence, was handed over by `insert` and is
      never mutated afterwards: `fetch` returns a private deep copy, trimmed on that copy.
    - `fetch` always leaves at least one token to prefill (the model must compute the logits
      of the last prompt token), so at most `len(tokens) - 1` tokens are reused.
    - A stored cache is cut short (trimmed to the common prefix) only when every layer can be
      trimmed; a rotating / sliding-window cache that has wrapped around is reused only whole,
      when its entry's tokens are a prefix of the prompt, and is not stored at all when going
      on from it would not compute what a cold prefill does (`continues_exactly`): outputs
      never depend on the cache.
    - Entries belong to one `model_key`; the SSD tier, if any, must carry the same key, so a
      model swap never serves another model's KV.
    - Total `nbytes` of the entries (sum of `nbytes` of their state arrays) never exceeds
      `max_bytes`: the least recently inserted or fetched entries are evicted first, and an
      entry larger than the whole budget is not kept in memory (it may still go to disk).
    - Inserting a trimmable entry drops stored entries that are prefixes of it: trimming the
      new one serves them, so they would only hold memory.
    - Everything runs on the worker's MLX thread; there are no locks.

    Differs from mlx-lm's `LRUPromptCache` (whose `PromptTrie` it wraps) on purpose: that one
    returns an exact match with nothing left to prefill, orders eviction by insertion only
    (a system prompt fetched by every request would still be evicted first), keeps an oversize
    entry briefly by evicting everything else, and has no hit statistics or disk tier.
    """

    def __init__(self, max_bytes: int, model_key: str, ssd: SsdCacheTier | None = None):
        if ssd is not None and ssd.model_key != model_key:
            raise ValueError(f"SSD cache tier is for model {ssd.model_key!r}, not {model_key!r}")
        self.max_bytes = max(0, int(max_bytes))
        self.model_key = model_key
        self.ssd = ssd
        self._trie = PromptTrie()
        self._entries: OrderedDict[Tokens, _Entry] = OrderedDict()  # oldest first
        self._bytes = 0
        self._counts = dict.fromkeys(_COUNTERS, 0)

    def fetch(self, tokens: Sequence[int]) -> tuple[list[Any] | None, list[int]]:
        """(cache, remaining): a private copy of the cache of the longest reusable prefix of
        `tokens` and the tokens still to prefill (at least one); (None, tokens) on a miss."""
        tokens = list(tokens)
        reuse = find_reuse(self._trie, self.model_key, tokens, self._is_trimmable)
        if self.ssd is not None:
            from_disk = self.ssd.find(tokens)
            if from_disk is not None and from_disk.length > (reuse.length if reuse else 0):
                restored = self.ssd.load(from_disk.entry)
                if restored is not None:
                    if not self._store(from_disk.entry, restored):
                        # Too large to keep in memory: serve the loaded copy itself.
                        return self._serve(restored, from_disk, tokens)
                    reuse = find_reuse(self._trie, self.model_key, tokens, self._is_trimmable)
        if reuse is None:
            self._counts["misses"] += 1
            return None, tokens
        self._entries.move_to_end(reuse.entry)
        return self._serve(copy.deepcopy(self._entries[reuse.entry].cache), reuse, tokens)

    def insert(self, tokens: Sequence[int], cache: list[Any]) -> None:
        """Stores `cache` (taking ownership) as the cache of exactly `tokens`; persists it to
        the SSD tier, if any; evicts least recently used entries past the byte budget. A cache
        that has processed more tokens than `tokens` is trimmed to them; fewer: refused."""
        key = tuple(tokens)
        if not key or not cache:
            return
        if not continues_exactly(cache):
            self._counts["inexact"] += 1
            return
        if not self._matches(key, cache):
            return
        # Materialize now: a stored entry must not keep a lazy graph (or its inputs) alive.
        mx.eval([c.state for c in cache])
        if self.ssd is not None:
            self.ssd.persist(key, cache)
        self._store(key, cache)

    def stats(self) -> dict[str, int]:
        """entries, bytes, hits, misses, tokens_reused, evictions, refused (larger than the
        budget), inexact (not stored: see `continues_exactly`), mismatched (not stored: the
        cache held fewer tokens than claimed), and the SSD tier's own counters prefixed with
        `ssd_` (e.g. ssd_restores)."""
        result = {"entries": len(self._entries), "bytes": self._bytes, **self._counts}
        if self.ssd is not None:
            result.update({f"ssd_{k}": v for k, v in self.ssd.stats().items()})
        return result

    def close(self) -> None:
        """Flushes and stops the SSD tier, if any (memory entries stay usable)."""
        if self.ssd is not None:
            self.ssd.close()

    def clear(self) -> None:
        """Drops every in-memory entry (the SSD tier keeps its files)."""
        self._trie = PromptTrie()
        self._entries.clear()
        self._bytes = 0

    def _matches(self, key: Tokens, cache: list[Any]) -> bool:
        """Whether `cache` holds exactly `key`'s tokens, after trimming any extra ones: a cache
        stored under the wrong tokens would change outputs, so it is refused (and logged)."""
        covered = covered_tokens(cache)
        if covered is None or covered == len(key):
            return True
        if covered > len(key) and can_trim_prompt_cache(cache):
            trim_prompt_cache(cache, covered - len(key))
            return True
        self._counts["mismatched"] += 1
        level = logging.WARNING if self._counts["mismatched"] == 1 else logging.DEBUG
        log.log(level, "prefix cache: a cache of %d tokens was offered for %d", covered, len(key))
        return False

    def _is_trimmable(self, entry: Tokens) -> bool:
        return self._entries[entry].trimmable

    def _serve(
        self, cache: list[Any], reuse: Reuse, tokens: list[int]
    ) -> tuple[list[Any], list[int]]:
        if reuse.trim:
            trim_prompt_cache(cache, reuse.trim)
        self._counts["hits"] += 1
        self._counts["tokens_reused"] += reuse.length
        return cache, tokens[reuse.length :]

    def _store(self, key: Tokens, cache: list[Any]) -> bool:
        nbytes = cache_nbytes(cache)
        if nbytes > self.max_bytes:
            self._counts["refused"] += 1
            log.debug(
                "prefix cache entry of %d bytes exceeds the %d byte budget", nbytes, self.max_bytes
            )
            return False
        trimmable = can_trim_prompt_cache(cache)
        if key in self._entries:
            self._bytes -= self._entries.pop(key).nbytes
        if trimmable:
            for prefix in pop_prefixes(self._trie, self.model_key, key):
                self._bytes -= self._entries.pop(prefix).nbytes
        self._trie.add(self.model_key, list(key), key)
        self._entries[key] = _Entry(cache, nbytes, trimmable)
        self._bytes += nbytes
        while self._bytes > self.max_bytes:
            oldest, entry = self._entries.popitem(last=False)
            self._trie.pop(self.model_key, list(oldest))
            self._bytes -= entry.nbytes
            self._counts["evictions"] += 1
        return True


def model_key(model_path: str | Path, **settings: Any) -> str:
    """Stable key of a checkpoint and the settings that shape its KV cache.

    Hashes config.json, the weight files' names, sizes and modification times, the mlx and
    mlx-lm versions (a new version may lay out or compute the cache differently) and the
    caller's `settings` (e.g. dtype, kv_bits, adapter path). A path that is not a directory is
    hashed by its name alone.
    """
    digest = hashlib.sha256()
    digest.update(f"mlx={mx.__version__};mlx_lm={mlx_lm.__version__}\n".encode())
    path = Path(model_path)
    if path.is_dir():
        config = path / "config.json"
        if config.is_file():
            digest.update(config.read_bytes())
        for weights in sorted(path.glob("*.safetensors")):
            st = weights.stat()
            digest.update(f"{weights.name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    else:
        digest.update(f"name:{model_path}\n".encode())
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:32]
