"""The worker host: `vllm-omni-mlx worker --listen tcp://HOST:PORT MODEL` on another machine
(see host.py). It imports neither the gateway nor MLX: MLX runs in its worker subprocess."""
