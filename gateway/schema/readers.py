"""Typed readers for single OpenAI request fields, and the sampling fields both APIs share.

Each reader takes the body and a field name and returns the value, or None when the field is
absent or JSON null (null never changes the output, so it reads as "not set"), or raises a 400
naming the field. JSON booleans are not numbers here, although Python's bool is an int.
"""

from __future__ import annotations

import math
import time
from typing import Any

from gateway.http.errors import invalid, unknown_field
from protocol.inputs import SamplingParams

MAX_STOP_SEQUENCES = 4  # OpenAI's limit


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(value), "number" if isinstance(value, int | float) else "null"
    )


def number(
    body: dict, name: str, lo: float, hi: float | None, *, lo_open: bool = False
) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(name, f"`{name}` must be a number, got {_type_name(value)}")
    too_low = value <= lo if lo_open else value < lo
    if too_low or (hi is not None and value > hi):
        low = f"> {lo}" if lo_open else f">= {lo}"
        high = f" and <= {hi}" if hi is not None else ""
        raise invalid(name, f"`{name}` must be {low}{high}, got {value}")
    return float(value)


# No integer field means anything past 64 bits (nor can the wire carry it): a 400, not a 5xx.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def integer(body: dict, name: str, lo: int | None = None, hi: int | None = None) -> int | None:
    """An integer field in [lo, hi] (and a 64-bit integer in any case), or a 400 naming it."""
    value = body.get(name)
    if value is None:
        return None
    # 3.0 is an integer in JSON's eyes; 3.5 is not.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(name, f"`{name}` must be an integer, got {_type_name(value)}")
    low = INT64_MIN if lo is None else lo
    high = INT64_MAX if hi is None else hi
    if not low <= value <= high:
        bounds = [f">= {lo}" if lo is not None else "", f"<= {hi}" if hi is not None else ""]
        said = " and ".join(b for b in bounds if b)
        if (lo is None and value < low) or (hi is None and value > high):
            said = f"{said} and a 64-bit integer" if said else "a 64-bit integer"
        raise invalid(name, f"`{name}` must be {said}, got {value}")
    return value


def boolean(body: dict, name: str) -> bool | None:
    value = body.get(name)
    if value is None or isinstance(value, bool):
        return value
    raise invalid(name, f"`{name}` must be a boolean, got {_type_name(value)}")


def string(body: dict, name: str) -> str | None:
    value = body.get(name)
    if value is None or isinstance(value, str):
        return value
    raise invalid(name, f"`{name}` must be a string, got {_type_name(value)}")


def obj(body: dict, name: str) -> dict | None:
    value = body.get(name)
    if value is None or isinstance(value, dict):
        return value
    raise invalid(name, f"`{name}` must be an object, got {_type_name(value)}")


def array(body: dict, name: str) -> list | None:
    value = body.get(name)
    if value is None or isinstance(value, list):
        return value
    raise invalid(name, f"`{name}` must be an array, got {_type_name(value)}")


def stop_sequences(body: dict) -> list[str]:
    value = body.get("stop")
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise invalid("stop", "`stop` must be a string or an array of strings")
    if len(items) > MAX_STOP_SEQUENCES:
        raise invalid("stop", f"`stop` may hold at most {MAX_STOP_SEQUENCES} sequences")
    for item in items:
        if not isinstance(item, str):
            raise invalid("stop", "`stop` must be a string or an array of strings")
        if not item:
            raise invalid("stop", "`stop` sequences must not be empty strings")
    return list(items)


def logit_bias(body: dict) -> dict[int, float] | None:
    value = obj(body, "logit_bias")
    if not value:
        return None
    bias: dict[int, float] = {}
    for key, weight in value.items():
        if not (key.isascii() and key.isdigit()):
            raise invalid("logit_bias", f"`logit_bias` keys must be token ids, got {key!r}")
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise invalid("logit_bias", f"`logit_bias[{key}]` must be a number")
        if not -100 <= weight <= 100:
            raise invalid("logit_bias", f"`logit_bias[{key}]` must be in [-100, 100]")
        bias[int(key)] = float(weight)
    return bias


SEED_RANGE = (-(2**63), 2**64 - 1)


def seed(body: dict) -> int | None:
    value = integer(body, "seed", *SEED_RANGE)
    # OpenAI seeds are int64; the worker seeds a uint64 generator: same seed, same stream.
    return None if value is None else value % 2**64


def top_k(body: dict) -> int | None:
    value = integer(body, "top_k")
    return 0 if value == -1 else value  # vLLM spells "disabled" -1, mlx-lm spells it 0


def plain_number(body: dict, name: str) -> float | None:
    """A number field whose range the request's table has checked."""
    return number(body, name, -math.inf, None)


def sampling_params(body: dict, max_tokens: int) -> SamplingParams:
    """SamplingParams from the shared fields; None wherever the client set nothing. Their
    ranges are checked by the request's table first (gateway/schema/openai_chat.SAMPLING)."""
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=plain_number(body, "temperature"),
        top_p=plain_number(body, "top_p"),
        top_k=top_k(body),
        min_p=plain_number(body, "min_p"),
        repetition_penalty=plain_number(body, "repetition_penalty"),
        presence_penalty=plain_number(body, "presence_penalty"),
        frequency_penalty=plain_number(body, "frequency_penalty"),
        seed=seed(body),
        logit_bias=logit_bias(body),
        stop=stop_sequences(body),
    )


def time_limit(body: dict) -> float | None:
    """The moment (time.time()) a request's `timeout` seconds end; None without one."""
    seconds = plain_number(body, "timeout")
    return time.time() + seconds if seconds is not None else None


def stream_flags(body: dict) -> tuple[bool, bool]:
    """(stream, include_usage). `stream_options` without streaming is a 400, as in OpenAI."""
    stream = bool(boolean(body, "stream"))
    options = obj(body, "stream_options")
    if options is None:
        return stream, False
    if not stream:
        raise invalid("stream_options", "`stream_options` is only allowed when `stream` is true")
    for key, value in options.items():
        path = f"stream_options.{key}"
        if key not in ("include_usage", "include_obfuscation"):
            raise unknown_field(path)
        if value is not None and not isinstance(value, bool):
            raise invalid(path, f"`{path}` must be a boolean, got {_type_name(value)}")
    return stream, bool(options.get("include_usage"))


def prompt_cache_options(body: dict, name: str = "prompt_cache_options") -> None:
    """Checked, then dropped: the prefix cache is automatic and keeps entries by its own LRU
    budget, so a TTL or an implicit / explicit breakpoint mode changes nothing here."""
    options = obj(body, name)
    for key, value in (options or {}).items():
        path = f"{name}.{key}"
        if key not in ("ttl", "mode"):
            raise unknown_field(path)
        if value is not None and not isinstance(value, str):
            raise invalid(path, f"`{path}` must be a string, got {_type_name(value)}")
