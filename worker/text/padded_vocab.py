"""Tokens without text: a padded vocabulary's rows past its tokenizer's entries.

Models pad their embedding to a round number of rows (Qwen's 151,936 over 151,665 entries), and
those rows can be sampled: rarely on trained weights, often on random ones. Such a token has no
text (the tokenizer's own `decode` gives ""). mlx-vlm's streaming detokenizers and mlx-lm's
SentencePiece one raise an IndexError on it, mlx-lm's BPE one writes "!" (so on such a token a
text model's reply differs from mlx-lm's there); here it adds none, and the request goes on.

Two places feed detokenizers: a request's own text (worker/text/request.py, which asks
`has_entry` before each token, whatever detokenizer the tokenizer gave it), and mlx-vlm's
generator, which feeds a copy of its processor's detokenizer itself: that one is given a class
whose `add_token` asks the same (`skip_tokens_without_entry`, worker/vision/model.py).
"""

from __future__ import annotations

from typing import Any

_SKIPPING: dict[type, type] = {}  # a detokenizer class -> its subclass that skips such tokens


def has_entry(detokenizer: Any, token: int) -> bool:
    """Whether `detokenizer`'s token map has an entry for `token`. One without a map decodes
    through the (fast) tokenizer, whose `decode` takes any id: always True."""
    tokenmap = getattr(detokenizer, "tokenmap", None)
    if tokenmap is None:
        return True
    return 0 <= token < len(tokenmap) and tokenmap[token] is not None


def skip_tokens_without_entry(detokenizer: Any) -> None:
    """Gives `detokenizer` (and the copies mlx-vlm makes of it per request) an `add_token`
    that skips a token without an entry."""
    cls = type(detokenizer)
    if cls in _SKIPPING.values():
        return
    skipping = _SKIPPING.get(cls)
    if skipping is None:

        def add_token(self: Any, token: int, *args: Any, **kwargs: Any) -> None:
            if has_entry(self, token):
                cls.add_token(self, token, *args, **kwargs)

        name = f"SkippingUnknown{cls.__name__}"
        namespace = {"add_token": add_token, "__module__": __name__, "__qualname__": name}
        skipping = _SKIPPING[cls] = type(name, (cls,), namespace)
    detokenizer.__class__ = skipping
