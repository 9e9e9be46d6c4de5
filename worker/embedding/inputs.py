"""An embedding request's inputs, checked and tokenized: token-id rows, or a 400 naming the
input (by its index in `input`) or the limit it breaks.

Texts are tokenized as sentence-transformers does (the model's special tokens added; with
`truncate`, cut by the tokenizer, which keeps them); token-id lists are taken as they are and
must be ids of the model's vocabulary. Limits (EmbeddingInfo): tokens of one input, inputs of
one request, tokens of one request. A score request's pairs are checked here too (one query
or one per document, at most max_inputs documents); rerankers tokenize them their own way
(worker/embedding/rerankers.py), the embedding fallback as texts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.inputs import EmbedInputs, ScoreInputs
from worker.runtime.errors import bad_request


@dataclass(frozen=True)
class Limits:
    max_input_tokens: int
    max_inputs: int
    max_total_tokens: int
    vocab_size: int  # 0: unknown (ids then unchecked against it)
    # The longest token's stored length (worker/text/prompt_size.py); 0: unknown. A text of more
    # than max_input_tokens * longest_token characters cannot fit, and is refused (or, when
    # truncated, cut to a length that still holds the kept tokens) before it is tokenized.
    longest_token: int = 0


def tokenize(inputs: EmbedInputs, tokenizer: Any, limits: Limits) -> list[list[int]]:
    """One token-id row per input, in order; RequestError (bad_request) naming the problem."""
    items = inputs.input
    if not items:
        raise bad_request("`input` is empty: send at least one text or token-id list")
    if len(items) > limits.max_inputs:
        raise bad_request(
            f"`input` has {len(items)} inputs; this server takes at most {limits.max_inputs} "
            "per request (--max-embedding-inputs)"
        )
    keep = kept_tokens(inputs.truncate, limits.max_input_tokens)
    items = [
        bounded_text(item, limits, keep, f"input[{i}]") if isinstance(item, str) else item
        for i, item in enumerate(items)
    ]
    rows = _encode_texts(items, tokenizer, keep)
    for index, row in enumerate(rows):
        if row is None:  # token ids
            row = rows[index] = _checked_ids(items[index], index, limits.vocab_size)
            if keep is not None:
                row = rows[index] = row[:keep]
    checked = check_rows(rows, limits, lambda i: f"input[{i}]")  # type: ignore[arg-type]
    check_total(checked, limits, "input")
    return checked


def check_rows(
    rows: list[list[int]], limits: Limits, name: Callable[[int], str]
) -> list[list[int]]:
    """Every row non-empty and within the model's length (a 400 naming `name(index)`)."""
    for index, row in enumerate(rows):
        if not row:
            raise bad_request(f"`{name(index)}` is empty: it has no tokens")
        if len(row) > limits.max_input_tokens:
            raise bad_request(
                f"`{name(index)}` is {len(row)} tokens long; this model takes at most "
                f"{limits.max_input_tokens} (or set truncate_prompt_tokens)"
            )
    return rows


def check_total(rows: list[list[int]], limits: Limits, field: str) -> None:
    total = sum(len(row) for row in rows)
    if total > limits.max_total_tokens:
        raise bad_request(
            f"`{field}` is {total} tokens in all; this server takes at most "
            f"{limits.max_total_tokens} per request (--max-embedding-tokens)"
        )


def check_pairs(inputs: ScoreInputs, limits: Limits) -> list[tuple[str, str]]:
    """The (query, document) pairs of a score request, in document order."""
    queries, documents = inputs.queries, inputs.documents
    if not documents:
        raise bad_request("`documents` is empty: send at least one document")
    if not queries:
        raise bad_request("`query` is empty: send a query")
    if len(queries) not in (1, len(documents)):
        raise bad_request(
            f"`queries` has {len(queries)} texts and `documents` {len(documents)}: send one "
            "query, or one per document"
        )
    if len(documents) > limits.max_inputs:
        raise bad_request(
            f"`documents` has {len(documents)} documents; this server takes at most "
            f"{limits.max_inputs} per request (--max-embedding-inputs)"
        )
    keep = kept_tokens(inputs.truncate, limits.max_input_tokens)
    query_names = ["query"] if len(queries) == 1 else [f"queries[{i}]" for i in range(len(queries))]
    queries = [
        bounded_text(q, limits, keep, name) for q, name in zip(queries, query_names, strict=True)
    ]
    documents = [bounded_text(d, limits, keep, f"documents[{i}]") for i, d in enumerate(documents)]
    return [(queries[i if len(queries) > 1 else 0], d) for i, d in enumerate(documents)]


def bounded_text(text: str, limits: Limits, keep: int | None, name: str) -> str:
    """`text`, or a 400 naming it when it cannot fit the model (`keep` None: no truncation);
    truncated, only the part that can hold the kept tokens, with a margin for the cut."""
    if not limits.longest_token:
        return text
    if keep is not None:
        return text[: (keep + 64) * limits.longest_token]
    if len(text) > limits.max_input_tokens * limits.longest_token:
        raise bad_request(
            f"`{name}` is at least {len(text) // limits.longest_token} tokens long; this model "
            f"takes at most {limits.max_input_tokens} (or set truncate_prompt_tokens)"
        )
    return text


def encode_texts(
    texts: list[str], tokenizer: Any, truncate: int | None, longest: int
) -> list[list[int]]:
    """Texts' rows with the model's special tokens, cut as `truncate` says (EmbedInputs)."""
    return _encode_texts(texts, tokenizer, kept_tokens(truncate, longest))  # type: ignore[return-value]


def kept_tokens(truncate: int | None, longest: int) -> int | None:
    if truncate is None:
        return None
    if truncate == -1:
        return longest
    if truncate < 1:
        raise bad_request("`truncate_prompt_tokens` must be -1 (the model's limit) or >= 1")
    return min(truncate, longest)


def _encode_texts(items: list[Any], tokenizer: Any, keep: int | None) -> list[list[int] | None]:
    """The texts' rows in one tokenizer call (None where the input is token ids)."""
    at = [i for i, item in enumerate(items) if isinstance(item, str)]
    rows: list[list[int] | None] = [None] * len(items)
    if not at:
        return rows
    options: dict[str, Any] = {"add_special_tokens": True}
    if keep is not None:
        options.update(truncation=True, max_length=keep)
    encoded = tokenizer([items[i] for i in at], **options)["input_ids"]
    for i, row in zip(at, encoded, strict=True):
        rows[i] = list(row)
    return rows


def _checked_ids(item: Any, index: int, vocab_size: int) -> list[int]:
    if not isinstance(item, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) for t in item
    ):
        raise bad_request(f"`input[{index}]` must be a string or a list of token ids")
    bad = next((t for t in item if t < 0 or (vocab_size and t >= vocab_size)), None)
    if bad is not None:
        raise bad_request(
            f"`input[{index}]` holds token id {bad}, outside this model's vocabulary "
            f"(0 to {vocab_size - 1})"
        )
    return list(item)
