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

Inside a JSON string every bracket is ordinary text, so a tokenizer with `]]` or `}}` as one
token would keep writing it and never close the string: when a token that can only be string
text (`x`) is allowed, the answer is inside a string, and `"` goes first.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

# In preference order. Opening `"` doubles as "close the string"; `[`/`{` only when a value
# must be a container and no shorter complete value is allowed.
_CLOSERS = ('"}}', '"}', '"]', "}}", "]}", "}]", "]]", '"', "}", "]")
_VALUES = ('""', "0", "null", "false", "{}", "[]", "[", "{")
_SEPARATORS = (", ", ",", ": ", ":")

_STRING_TEXT = "x"  # valid JSON only inside a string: no keyword or number starts with it


@dataclass(frozen=True, slots=True)
class CloseOut:
    """A tokenizer's close-out tokens: the preference list, and what tells a string apart."""

    ids: tuple[int, ...]  # EOS first, then the preference list's single tokens
    quote: int | None  # `"`
    string_text: int | None  # `x`


_lock = threading.Lock()
_cache: weakref.WeakKeyDictionary[Any, CloseOut] = weakref.WeakKeyDictionary()


def reserve_for(max_tokens: int) -> int:
    """How many of the last tokens of the budget are spent closing (at least 8, at most 32)."""
    return max(8, min(32, max_tokens // 8))


def close_out_candidates(tokenizer: Any) -> CloseOut:
    """The preference list's single tokens of this tokenizer (EOS first)."""
    with _lock:
        cached = _cache.get(tokenizer)
    if cached is not None:
        return cached
    candidates = sorted(tokenizer.eos_token_ids)
    for text in (*_CLOSERS, *_SEPARATORS, *_VALUES):
        token = _single(tokenizer, text)
        if token is not None and token not in candidates:
            candidates.append(token)
    found = CloseOut(tuple(candidates), _single(tokenizer, '"'), _single(tokenizer, _STRING_TEXT))
    with _lock:
        _cache[tokenizer] = found
    return found


def _single(tokenizer: Any, text: str) -> int | None:
    ids = tokenizer.encode(text, add_special_tokens=False)
    return int(ids[0]) if len(ids) == 1 else None


def pick(words: np.ndarray, close_out: CloseOut) -> int | None:
    """The token to force: `"` inside a string, else the first allowed candidate; None when
    no candidate is allowed."""
    quote, text = close_out.quote, close_out.string_text
    if quote is not None and text is not None and _allowed(words, text) and _allowed(words, quote):
        return quote
    for token in close_out.ids:
        if _allowed(words, token):
            return token
    return None


def _allowed(words: np.ndarray, token: int) -> bool:
    return bool(words[token >> 5] & np.uint32(1 << (token & 31)))
