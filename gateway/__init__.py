"""The HTTP gateway: auth, parsing, SSE framing; it forwards requests to MLX workers over
ZeroMQ (docs/architecture.md)."""

# Checked at start-up (gateway/cli/install_check.py): this package is vllm-omni-mlx's.
__distribution__ = "vllm-omni-mlx"
