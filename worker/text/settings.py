"""Server-wide generation settings (the worker's command line), with mlx-lm's defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GenerationSettings:
    """How every request is generated; per-request sampling lives in SamplingParams."""

    prefill_step_size: int = 2048  # prompt tokens per prefill chunk (mlx-lm's default)
    num_draft_tokens: int = 3  # speculative decoding: draft tokens per verification
    kv_bits: int | None = None  # quantize the KV cache to this many bits
    kv_group_size: int = 64
    quantized_kv_start: int = 5000  # tokens after which the KV cache is quantized
    max_kv_size: int | None = None  # rotating KV cache of this many tokens

    def batch_path_blocker(self) -> str | None:
        """What keeps mlx-lm's BatchGenerator from serving these settings (None: nothing)."""
        if self.kv_bits is not None:
            return "a quantized KV cache (--kv-bits)"
        if self.max_kv_size is not None:
            return "a rotating KV cache (--max-kv-size)"
        return None
