"""How the text engines use the prefix cache (worker/cache/prefix_cache.py): fetch a request's cached
prefix on admission, store prompt + generated tokens when it ends.

The cache is an optimisation: a failure in it is logged and the request goes on without it.
`open_prefix_cache` builds it (memory tier, optional SSD tier) from the worker's settings, keyed
by the checkpoint and every setting that shapes its KV cache, so entries are never served to
another model or configuration.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)


class PrefixReuse:
    """The engines' side of a PrefixCache (or of none: then it fetches and stores nothing)."""

    def __init__(self, cache: Any | None) -> None:
        self.cache = cache
        self.stats: Any = None  # the worker's WorkerStats, once bound: counts every lookup

    @property
    def enabled(self) -> bool:
        return self.cache is not None

    def fetch(
        self,
        prompt: Sequence[int],
        usable: Callable[[list[Any], int], bool] | None = None,
    ) -> tuple[list[Any] | None, int]:
        """(a private KV cache of the longest reusable prefix or None, tokens it covers).
        `usable(cache, tokens)` may refuse what was found. Each lookup is counted as vLLM
        counts them: the prompt's tokens queried, the reused ones hit."""
        if self.cache is None:
            return None, 0
        cache, cached = self._find(prompt)
        if cache is not None and usable is not None and not usable(cache, cached):
            cache, cached = None, 0
        if self.stats is not None:
            self.stats.count_prefix_cache(len(prompt), cached)
        return cache, cached

    def _find(self, prompt: Sequence[int]) -> tuple[list[Any] | None, int]:
        try:
            cache, remaining = self.cache.fetch(prompt)
        except Exception:
            log.exception("prefix cache lookup failed; prefilling the whole prompt")
            return None, 0
        if cache is None or not remaining:
            return None, 0
        return cache, len(prompt) - len(remaining)

    def close(self) -> None:
        """Finishes the SSD tier's pending writes (at worker exit)."""
        ssd = getattr(self.cache, "ssd", None)
        if ssd is not None:
            ssd.close()

    def store(self, tokens: Sequence[int], cache: list[Any] | None) -> None:
        """Hands `cache` (covering exactly `tokens`) over to the prefix cache."""
        if self.cache is None or cache is None or not tokens:
            return
        try:
            self.cache.insert(list(tokens), cache)
        except Exception:
            log.exception("storing %d tokens in the prefix cache failed", len(tokens))


def open_prefix_cache(
    max_bytes: int,
    model_path: str,
    settings: dict[str, Any],
    ssd_dir: str | None = None,
    ssd_max_bytes: int = 0,
) -> Any | None:
    """The PrefixCache for this model and settings, or None when `max_bytes` is 0 and there
    is no SSD tier."""
    if max_bytes <= 0 and not ssd_dir:
        return None
    from worker.cache.prefix_cache import PrefixCache, model_key

    key = model_key(model_path, **settings)
    ssd = None
    if ssd_dir:
        from worker.cache.ssd_cache import SsdCacheTier

        ssd = SsdCacheTier(ssd_dir, ssd_max_bytes, key)
    return PrefixCache(max_bytes, key, ssd=ssd)
