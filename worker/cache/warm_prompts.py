"""Warm prompts: prefixes prefilled into the prefix cache at start, before the first request.

The file's format and its parsing live in `protocol.launch.warm_prompts` (the gateway checks the file
before it spawns the worker); this is the MLX-thread half.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from worker.cache.prefix_cache import PrefixCache

DEFAULT_PREFILL_STEP = 2048


def warm_prefix_cache(
    prefix_cache: PrefixCache,
    model: Callable[..., Any],
    token_lists: Iterable[Sequence[int]],
    make_cache: Callable[[], list[Any]],
    prefill_step: int = DEFAULT_PREFILL_STEP,
) -> int:
    """Prefills each token list (reusing what the cache already holds, e.g. entries restored
    from the SSD tier) and inserts its cache; returns the number of tokens computed. Runs on
    the MLX thread. `make_cache` is e.g. `lambda: make_prompt_cache(model)`."""
    import mlx.core as mx

    computed = 0
    for tokens in token_lists:
        tokens = list(tokens)
        if not tokens:
            continue
        cache, remaining = prefix_cache.fetch(tokens)
        if cache is None:
            cache = make_cache()
        # Unlike a request, the whole sequence goes into the cache: no logits are needed.
        for start in range(0, len(remaining), prefill_step):
            chunk = mx.array(remaining[start : start + prefill_step])[None]
            model(chunk, cache=cache)
            mx.eval([c.state for c in cache])
        computed += len(remaining)
        prefix_cache.insert(tokens, cache)
    return computed
