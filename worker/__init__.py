"""The MLX worker process: it owns the model, its lock and caches, and streams tokens or PCM
back to the gateway (docs/architecture.md)."""

# Checked at start-up (gateway/cli/install_check.py): this package is vllm-omni-mlx's.
__distribution__ = "vllm-omni-mlx"
