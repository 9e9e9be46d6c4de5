"""llguidance, the grammar library behind constrained decoding: tokenizers, grammars, matchers.

Why llguidance (measured, docs/structured-output.md): it compiles a JSON schema in about a
millisecond where outlines-core needs tens of milliseconds to seconds (9 s for an open
`{"type": "object"}`), computes a token mask in tens of microseconds, covers recursive `$ref`,
formats and patterns, takes Lark grammars with inline JSON schemas and special tokens (what
the forced tool-call grammars need), and installs without torch.

The llguidance view of a tokenizer takes ~0.1-1 s to build (it walks the whole vocabulary),
so it is built on first use and kept for the tokenizer's lifetime.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import llguidance
import llguidance.hf

from worker.runtime.errors import bad_request
from worker.text.parsers.families import literal

# The JSON layout models are trained on (`{"a": 1, "b": [2, 3]}`), with no free whitespace:
# a weak or random model cannot run out of tokens padding with spaces.
JSON_LAYOUT = {"whitespace_flexible": False, "key_separator": ": ", "item_separator": ", "}

_lock = threading.Lock()
_tokenizers: weakref.WeakKeyDictionary[Any, llguidance.LLTokenizer] = weakref.WeakKeyDictionary()


def ll_tokenizer(tokenizer: Any) -> llguidance.LLTokenizer:
    """llguidance's view of an mlx-lm TokenizerWrapper (built once; RequestError if impossible)."""
    with _lock:
        cached = _tokenizers.get(tokenizer)
        if cached is not None:
            return cached
        hf = getattr(tokenizer, "_tokenizer", tokenizer)
        eos = sorted(getattr(tokenizer, "eos_token_ids", None) or [hf.eos_token_id])
        try:
            built = llguidance.hf.from_tokenizer(hf, n_vocab=len(hf), eos_token=eos)
        except Exception as exc:  # e.g. a slow (sentencepiece-only) tokenizer
            raise bad_request(
                f"constrained decoding is not available for this model's tokenizer: {exc}"
            ) from exc
        _tokenizers[tokenizer] = built
        return built


class LlgKit:
    """GrammarKit for llguidance Lark: special tokens by id, inline JSON schemas."""

    def __init__(self, tokenizer: Any, lenient: bool) -> None:
        self._vocab: Mapping[str, int] = tokenizer.get_vocab()
        self._ll = ll_tokenizer(tokenizer)
        self._options = {**JSON_LAYOUT, "lenient": lenient}

    def token(self, marker: str) -> str:
        token_id = self._vocab.get(marker)
        if token_id is not None and self._ll.is_special_token(token_id):
            return f"<[{token_id}]>"
        return literal(marker)

    def json(self, schema: Mapping[str, Any]) -> str:
        return "%json " + json.dumps(with_layout(schema, self._options), ensure_ascii=False)


def with_layout(schema: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The schema with the server's JSON compile options (the schema's own x-guidance wins)."""
    own = schema.get("x-guidance") if isinstance(schema.get("x-guidance"), Mapping) else {}
    return {**schema, "x-guidance": {**options, **own}}


def json_schema_grammar(schema: Mapping[str, Any], lenient: bool) -> str:
    """A top-level grammar for one JSON value valid against `schema`."""
    return llguidance.LLMatcher.grammar_from_json_schema(
        dict(schema), defaults={**JSON_LAYOUT, "lenient": lenient}
    )


def lark_grammar(lark: str) -> str:
    return llguidance.LLMatcher.grammar_from_lark(lark)


def regex_grammar(pattern: str) -> str:
    """A grammar for text that matches `pattern` whole (errors surface in compile_matcher)."""
    return llguidance.LLMatcher.grammar_from_regex(pattern)


def _cannot_enforce(field: str, error: str) -> Exception:
    message = " ".join(line.strip() for line in error.splitlines())
    return bad_request(f"{field} cannot be enforced: {message[:300] or 'invalid grammar'}")


def compile_matcher(tokenizer: Any, grammar: str, field: str) -> llguidance.LLMatcher:
    """A matcher for `grammar`; a grammar llguidance refuses is a 400 naming `field`."""
    matcher = llguidance.LLMatcher(ll_tokenizer(tokenizer), grammar, log_level=0)
    if matcher.is_error():
        raise _cannot_enforce(field, matcher.get_error())
    # A grammar can compile and still match nothing (`start: start`, an empty character
    # class): its first mask puts the matcher in error. Probed on a copy, one mask's cost.
    probe = matcher.deep_copy()
    probe.compute_bitmask()
    if probe.is_error():
        raise bad_request(f"{field} cannot be enforced: it matches no output")
    return matcher
