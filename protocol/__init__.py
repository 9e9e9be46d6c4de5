"""The gateway <-> worker wire protocol: messages, per-operation inputs, ready capabilities,
version and the msgpack codec."""

from protocol.codec import ProtocolError, decode, encode
from protocol.endpoints import Endpoints
from protocol.messages import PROTOCOL_VERSION

__all__ = ["PROTOCOL_VERSION", "Endpoints", "ProtocolError", "decode", "encode"]
