"""Request bodies as JSON, by strict rules, so that no body can become a 5xx.

The rules (README, "Request bodies"):
- valid JSON (RFC 8259) in UTF-8; `NaN`, `Infinity` and `-Infinity` are not JSON and are
  refused, and so is a number too large for a float (`1e999`), which Python would turn into
  infinity; integers keep their exact value (each field's own range check applies later), but
  one of more than 4,300 digits is refused (Python's own limit on int parsing);
- arrays and objects nest at most `MAX_DEPTH` levels deep: a deeper body is refused instead of
  exhausting the parser's recursion;
- an object may not name a key twice: which of two values was meant cannot be known, so the
  body is refused, naming the key (RFC 8259 leaves duplicates to the implementation).
Each violation is a `BodyError` whose message says which rule was broken.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 128


class BodyError(ValueError):
    """The body breaks one of the rules above; the message says which."""


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
    _check_depth(value)
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


def _check_depth(value: Any) -> None:
    """Iterative, so checking a deep body cannot itself run out of stack."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > MAX_DEPTH:
            raise BodyError(f"it nests arrays or objects more than {MAX_DEPTH} levels deep")
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
