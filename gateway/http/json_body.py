"""Request bodies as JSON, by strict rules, so that no body can become a 5xx.

The rules (README, "Request bodies"):
- valid JSON (RFC 8259) in UTF-8; `NaN`, `Infinity` and `-Infinity` are not JSON and are
  refused, and so is a number too large for a float (`1e999`), which Python would turn into
  infinity; integers keep their exact value (each field's own range check applies later), but
  one of more than 4,300 digits is refused (Python's own limit on int parsing);
- arrays and objects nest at most `MAX_DEPTH` levels deep: a deeper body is refused instead of
  exhausting the parser's recursion;
- an object may not name a key twice: which of two values was meant cannot be known, so the
  body is refused, naming the key (RFC 8259 leaves duplicates to the implementation);
- no string (value or key) may hold a lone UTF-16 surrogate (`"\ud800"` without its pair):
  `json.loads` accepts one, but it is not a Unicode character, so no UTF-8 encoder (msgpack's
  on the way to the worker, a tokenizer's) can take it. Checked once here, naming the field.
Each violation is a `BodyError` whose message says which rule was broken (and `param`, the
JSON path of the field, where one field is to blame).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 128
_SURROGATE = re.compile("[\ud800-\udfff]")


class BodyError(ValueError):
    """The body breaks one of the rules above; the message says which, `param` where."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def parse_json(raw: bytes) -> Any:
    try:
        value = json.loads(
            raw,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            object_pairs_hook=_unique_keys,
        )
    except RecursionError:
        raise BodyError(f"it nests arrays or objects more than {MAX_DEPTH} levels deep") from None
    except BodyError:
        raise
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, int digit limit
        raise BodyError(str(exc)) from None
    _check_tree(value)
    return value


def _reject_constant(name: str) -> Any:
    raise BodyError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise BodyError(f"the number {text[:40]} is too large")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise BodyError(f"an object names the key {key[:60]!r} twice")
            seen.add(key)
    return obj


def _check_tree(value: Any) -> None:
    """Depth and strings, iteratively, so checking a deep body cannot run out of stack."""
    if isinstance(value, str):
        _check_string(value, ())
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 1, ())]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, dict):
            items: Any = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            continue
        if depth > MAX_DEPTH:
            raise BodyError(f"it nests arrays or objects more than {MAX_DEPTH} levels deep")
        for key, child in items:
            if isinstance(key, str):
                _check_string(key, path, what="a key of")
            if isinstance(child, str):
                _check_string(child, (*path, key))
            elif isinstance(child, dict | list):
                stack.append((child, depth + 1, (*path, key)))


def _check_string(text: str, path: tuple[str | int, ...], what: str = "") -> None:
    if not text.isascii() and _SURROGATE.search(text):
        where = json_path(path)
        place = f"`{where}`" if where else "the body"
        if what:
            place = f"{what} {place}"
        raise BodyError(
            f"{place} holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape), "
            "which is not a Unicode character",
            param=where or None,
        )


def json_path(path: tuple[str | int, ...]) -> str:
    """`("messages", 0, "content")` -> `messages[0].content`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
