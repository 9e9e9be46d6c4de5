"""msgpack encoding of protocol messages: `[tag, *fields]`, nested messages as field arrays.

One encoder and one decoder, no logic beyond that. Decoding is positional, so a message's
field order is part of the protocol (pinned by tests/unit/test_protocol.py).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import msgpack

from protocol.messages import (
    MESSAGE_TAGS,
    ControlCall,
    Delta,
    ErrorInfo,
    Message,
    SamplingParams,
    Segment,
    Step,
    Submit,
    Tag,
    TokenLogprob,
    ToolCallDelta,
    Usage,
)


class ProtocolError(ValueError):
    """A frame that is not a valid message of this protocol version."""


_CLASS_BY_TAG: dict[int, type] = {int(tag): cls for cls, tag in MESSAGE_TAGS.items()}
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}

# Nested message fields: decoded from their positional arrays by these readers.
_NESTED: dict[type, dict[str, Any]] = {
    Submit: {"sampling": lambda v: _build(SamplingParams, v)},
    Step: {"deltas": lambda v: [_build_delta(d) for d in v]},
}


def _names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _as_array(obj: Any) -> list[Any]:
    """msgpack `default` hook: a nested dataclass becomes the array of its fields."""
    names = _FIELD_NAMES.get(type(obj)) or _names(type(obj))
    return [getattr(obj, n) for n in names]


def _build(cls: type, values: list[Any]) -> Any:
    names = _names(cls)
    if not isinstance(values, list) or len(values) != len(names):
        raise ProtocolError(f"{cls.__name__}: expected {len(names)} fields, got {values!r:.200}")
    return cls(*values)


def _build_delta(values: list[Any]) -> Delta:
    delta = _build(Delta, values)
    if delta.usage is not None:
        delta.usage = _build(Usage, delta.usage)
    if delta.error is not None:
        delta.error = _build(ErrorInfo, delta.error)
    if delta.tool_calls:
        delta.tool_calls = [_build(ToolCallDelta, t) for t in delta.tool_calls]
    if delta.logprobs is not None:
        delta.logprobs = [_build(TokenLogprob, t) for t in delta.logprobs]
    if delta.segments:
        delta.segments = [_build(Segment, s) for s in delta.segments]
    return delta


def encode(message: Message) -> bytes:
    tag = MESSAGE_TAGS[type(message)]
    return msgpack.packb([int(tag), *_as_array(message)], default=_as_array, use_bin_type=True)


def decode(frame: bytes) -> Message:
    try:
        raw = msgpack.unpackb(frame, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise ProtocolError(f"undecodable frame: {exc}") from exc
    if not isinstance(raw, list) or not raw or not isinstance(raw[0], int):
        raise ProtocolError(f"frame is not a tagged array: {raw!r:.200}")
    cls = _CLASS_BY_TAG.get(raw[0])
    if cls is None:
        raise ProtocolError(f"unknown message tag {raw[0]}")
    message = _build(cls, raw[1:])
    for name, read in _NESTED.get(cls, {}).items():
        setattr(message, name, read(getattr(message, name)))
    return message


__all__ = ["ProtocolError", "decode", "encode", "Tag", "ControlCall"]
