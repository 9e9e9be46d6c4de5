"""Server configuration: everything `vllm-omni-mlx serve` decides, in one frozen dataclass."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ServerConfig:
    model: str  # local checkpoint directory (hub ids are resolved by the CLI before this)
    served_model_name: str  # the id clients send as "model" and /v1/models lists
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    max_tokens: int = 2048  # default when a request gives no max_tokens
    max_num_seqs: int = 8  # requests the worker generates at once
    max_queue: int = 64  # requests waiting for admission; past it: 503 + Retry-After
    queue_timeout: float = 60.0  # seconds a request may wait for admission
    max_body_bytes: int = 16 * 1024 * 1024
    drain_timeout: float = 30.0  # model swap: seconds in-flight requests may finish
    ready_timeout: float = 600.0  # seconds a worker may take from spawn to READY
    heartbeat_interval: float = 0.5
    heartbeat_timeout: float = 30.0  # silence after which a worker is declared dead
    max_restarts: int = 5  # crashes within restart_window before giving up
    restart_window: float = 120.0
    log_level: str = "info"
