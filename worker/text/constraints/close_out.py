"""Closing a constrained answer before max_tokens runs out, so it still parses.

A grammar says what may come next, not when to stop: a string, a number's digits or an open
object's keys can go on until max_tokens cuts the JSON in half (a random-weight model never
stops by itself). So in the last few tokens of the budget the processor steers: each step it
forces the first allowed token of a fixed preference list (EOS; tokens that close strings,
objects and arrays; complete minimal values; separators), which walks any JSON-shaped grammar
to its end in a handful of tokens. When none of them is allowed (e.g. inside a key that must
spell a property name) the model picks among the allowed tokens as usual. A response that was
closed this way ends with finish reason "length", so the client knows it was cut short (unless
the only forced token was EOS at a point where the answer was already complete).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np

# In preference order. Opening `"` doubles as "close the string"; `[`/`{` only when a value
# must be a container and no shorter complete value is allowed.
_CLOSERS = ('"}}', '"}', '"]', "}}", "]}", "}]", "]]", '"', "}", "]")
_VALUES = ('""', "0", "null", "false", "{}", "[]", "[", "{")
_SEPARATORS = (", ", ",", ": ", ":")

_lock = threading.Lock()
_cache: weakref.WeakKeyDictionary[Any, list[int]] = weakref.WeakKeyDictionary()


def reserve_for(max_tokens: int) -> int:
    """How many of the last tokens of the budget are spent closing (at least 8, at most 32)."""
    return max(8, min(32, max_tokens // 8))


def close_out_candidates(tokenizer: Any) -> list[int]:
    """Token ids of the preference list (EOS first) that are single tokens of this tokenizer."""
    with _lock:
        cached = _cache.get(tokenizer)
    if cached is not None:
        return cached
    candidates = sorted(tokenizer.eos_token_ids)
    for text in (*_CLOSERS, *_SEPARATORS, *_VALUES):
        ids = tokenizer.encode(text, add_special_tokens=False)
        if len(ids) == 1 and ids[0] not in candidates:
            candidates.append(int(ids[0]))
    with _lock:
        _cache[tokenizer] = candidates
    return candidates


def pick(words: np.ndarray, candidates: list[int]) -> int | None:
    """The first candidate whose bit is set in the allowed-token bitmask, or None."""
    for token in candidates:
        if words[token >> 5] & np.uint32(1 << (token & 31)):
            return token
    return None
