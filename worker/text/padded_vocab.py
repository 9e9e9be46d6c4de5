"""Tokens without text: a padded vocabulary's rows past its tokenizer's entries.

Models pad their embedding to a round number of rows (Qwen's 151,936 over 151,665 entries), and
those rows can be sampled: rarely on trained weights, often on random ones. Such a token has no
text (the tokenizer's own `decode` gives ""). mlx-vlm's streaming detokenizers and mlx-lm's
SentencePiece one raise an IndexError on it, mlx-lm's BPE one writes "!" (so on such a token a
text model's reply differs from mlx-lm's there); here it adds none, and the request goes on.

Two places feed detokenizers, and both are given a class whose `add_token` skips such a token
(`skip_tokens_without_entry`): a request's own (worker/text/request.py), and the one mlx-vlm's
generator copies from its processor and feeds itself (worker/vision/model.py).
"""

from __future__ import annotations

from typing import Any, TypeVar

D = TypeVar("D")
_SKIPPING: dict[type, type] = {}  # a detokenizer class -> its subclass that skips such tokens


def _has_entry(detokenizer: Any, token: int) -> bool:
    """Whether `detokenizer`'s token map has an entry for `token`. One without a map decodes
    through the (fast) tokenizer, whose `decode` takes any id: always True."""
    tokenmap = getattr(detokenizer, "tokenmap", None)
    if tokenmap is None:
        return True
    return 0 <= token < len(tokenmap) and tokenmap[token] is not None


def skip_tokens_without_entry(detokenizer: D) -> D:
    """Gives `detokenizer` (and the copies made of it) an `add_token` that skips a token
    without an entry; returns it."""
    cls: Any = type(detokenizer)
    if cls in _SKIPPING.values():
        return detokenizer
    skipping = _SKIPPING.get(cls)
    if skipping is None:

        def add_token(self: Any, token: int, *args: Any, **kwargs: Any) -> None:
            if _has_entry(self, token):
                cls.add_token(self, token, *args, **kwargs)

        name = f"SkippingUnknown{cls.__name__}"
        namespace = {"add_token": add_token, "__module__": __name__, "__qualname__": name}
        skipping = _SKIPPING[cls] = type(name, (cls,), namespace)
    detokenizer.__class__ = skipping
    return detokenizer
