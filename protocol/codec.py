"""msgpack encoding of protocol messages, driven by their types.

Encoding turns a message into builtins (`msgspec.to_builtins`: each Struct an array of its
fields, a tagged one led by its tag, enums as their values, bytes kept as bytes) and packs
them with the `msgpack` package; decoding unpacks with `msgpack` and converts the arrays back
by type (`msgspec.convert` against the `Message` union), which checks every field's type on
the way: a frame that does not fit is a ProtocolError. No per-field code: the types in
`protocol.messages`, `protocol.inputs` and `protocol.ready` are the whole schema.

Its speed against the hand-written codec it replaced and against msgspec's own msgpack codec
(identical bytes): docs/benchmarks.md, "The wire codec" (scripts/bench_codec.py).
"""

from __future__ import annotations

from typing import Union

import msgpack
import msgspec

from protocol.host import HOST_MESSAGES, HostMessage
from protocol.messages import MESSAGES, Message
from protocol.wire import WireStruct

# Everything a frame can hold: the gateway <-> worker messages, and the worker host's own.
Frame = Union[Message, HostMessage]  # noqa: UP007


class ProtocolError(ValueError):
    """A frame that is not a valid message of this protocol version."""


# Dispatching on the tag first is five times faster than converting against the union.
def _by_tag() -> dict[int, type[WireStruct]]:
    table: dict[int, type[WireStruct]] = {}
    for cls in (*MESSAGES, *HOST_MESSAGES):
        tag = cls.__struct_config__.tag
        assert isinstance(tag, int), cls  # every message is tagged by an int (Tag, HostTag)
        table[tag] = cls
    return table


_BY_TAG = _by_tag()


def encode(message: Frame) -> bytes:
    builtins = msgspec.to_builtins(message, builtin_types=(bytes, bytearray))
    packed: bytes = msgpack.packb(builtins, use_bin_type=True)
    return packed


def decode(frame: bytes) -> Frame:
    try:
        raw = msgpack.unpackb(frame, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise ProtocolError(f"undecodable frame: {exc}") from exc
    cls = _BY_TAG.get(raw[0]) if isinstance(raw, list) and raw and isinstance(raw[0], int) else None
    if cls is None:
        raise ProtocolError(f"not a tagged message of this protocol: {raw!r:.200}")
    try:
        decoded: Frame = msgspec.convert(raw, cls)  # type: ignore[assignment]  # cls is a Frame
        return decoded
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"not a {cls.__name__} of this protocol version: {exc}") from None


__all__ = ["Frame", "ProtocolError", "decode", "encode"]
