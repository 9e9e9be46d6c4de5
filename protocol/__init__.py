"""The gateway <-> worker wire protocol: messages, per-operation inputs, ready capabilities,
version and the msgpack codec."""

# Checked at start-up (gateway/cli/install_check.py): this package is vllm-omni-mlx's, and the
# distribution's version (pyproject.toml reads it from here).
__distribution__ = "vllm-omni-mlx"
__version__ = "0.1.0"

from protocol.codec import Frame, ProtocolError, decode, encode
from protocol.endpoints import Endpoints
from protocol.messages import PROTOCOL_VERSION

__all__ = ["PROTOCOL_VERSION", "Endpoints", "Frame", "ProtocolError", "decode", "encode"]
