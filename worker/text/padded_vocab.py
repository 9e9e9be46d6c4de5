"""Tokens without text: a padded vocabulary's rows past its tokenizer's entries.

Models pad their embedding to a round number of rows (Qwen's 151,936 over 151,665 entries), and
those rows can be sampled: rarely on trained weights, often on random ones. Such a token has no
text (the tokenizer's own `decode` gives ""). mlx-vlm's streaming detokenizers and mlx-lm's
SentencePiece one raise an IndexError on it, mlx-lm's BPE one writes "!"; here it adds none, in
the request's text (worker/text/request.py) and in the detokenizer mlx-vlm's generator keeps
(worker/vision/model.py), so the request goes on.
"""

from __future__ import annotations

from typing import Any

_TOLERANT: dict[type, type] = {}


def has_entry(detokenizer: Any, token: int) -> bool:
    """Whether `detokenizer`'s tokenizer has an entry for `token` (a detokenizer without a
    token map decodes through the tokenizer, which takes any id)."""
    tokenmap = getattr(detokenizer, "tokenmap", None)
    return tokenmap is None or 0 <= token < len(tokenmap)


def skip_tokens_without_entry(detokenizer: Any) -> None:
    """Gives `detokenizer` (and the copies mlx-vlm makes of it per request) an `add_token`
    that skips a token without an entry."""
    cls = type(detokenizer)
    tolerant = _TOLERANT.get(cls)
    if tolerant is None:

        def add_token(self: Any, token: int, *args: Any, **kwargs: Any) -> None:
            if has_entry(self, token):
                cls.add_token(self, token, *args, **kwargs)

        tolerant = _TOLERANT[cls] = type(cls.__name__, (cls,), {"add_token": add_token})
    detokenizer.__class__ = tolerant
