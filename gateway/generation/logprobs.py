"""The worker's per-token logprobs (`TokenLogprob`) in the two OpenAI shapes.

Chat: `{"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}], "refusal": null}`.
Completions (legacy): parallel arrays `tokens`, `token_logprobs`, `top_logprobs` (one
`{token: logprob}` map per position) and `text_offset` (each token's character offset in the
choice's text, counted from the start of the echoed prompt when there is one).

A token that a structured-output grammar masked has a logprob of -inf; JSON has no infinity, so
it is written as -9999.0, as vLLM does.
"""

from __future__ import annotations

import math
from typing import Any

from protocol.messages import TokenLogprob

MASKED_LOGPROB = -9999.0


def _finite(logprob: float) -> float:
    return logprob if math.isfinite(logprob) else MASKED_LOGPROB


def _token_entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": _finite(logprob), "bytes": list(token.encode("utf-8"))}


def chat_content(entries: list[TokenLogprob]) -> list[dict[str, Any]]:
    """The `logprobs.content` list of a chat choice or chunk."""
    content = []
    for entry in entries:
        item = _token_entry(entry.token, entry.logprob)
        item["top_logprobs"] = [_token_entry(top[1], top[2]) for top in entry.top]
        content.append(item)
    return content


def chat_logprobs(entries: list[TokenLogprob] | None) -> dict[str, Any] | None:
    if entries is None:
        return None
    return {"content": chat_content(entries), "refusal": None}


def completion_logprobs(entries: list[TokenLogprob], offset: int) -> tuple[dict[str, Any], int]:
    """The legacy `logprobs` object for `entries`, whose first token starts at character
    `offset` of the choice's text; returns it and the offset after the last token."""
    tokens, values, tops, offsets = [], [], [], []
    for entry in entries:
        tokens.append(entry.token)
        values.append(_finite(entry.logprob))
        tops.append({top[1]: _finite(top[2]) for top in entry.top})
        offsets.append(offset)
        offset += len(entry.token)
    logprobs = {
        "tokens": tokens,
        "token_logprobs": values,
        "top_logprobs": tops,
        "text_offset": offsets,
    }
    return logprobs, offset
