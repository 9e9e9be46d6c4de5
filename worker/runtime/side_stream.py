"""A second MLX CPU stream: the other core, for work MLX would run on one.

MLX's CPU backend runs each stream's operations on that stream's own thread, and computes
elementwise functions (`exp`, `erf`, `tanh`, the softmax's exponentials) one element at a time
(~14 ns each on the development machine), so on the CPU they use one core however many the
machine has. Work split into independent parts (other heads, other rows, one of blocks that
are summed), one part built under `with mx.stream(side_stream())`, runs on two cores; the
worker's Python still calls MLX from its one thread, and MLX joins the parts where an
operation reads both. Users:
worker/transcription/whisper_fast.py (Whisper's encoder heads), worker/vision/lanes.py
(Qwen-VL vision blocks), worker/text/laned_attention.py (a text model's long attention) and
worker/speech/kokoro_fast.py (a resblock of each Kokoro generator stage).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import mlx.core as mx

# One per thread: an MLX stream belongs to the thread that made it.
_local = threading.local()


def side_stream() -> Any:
    """This thread's second CPU stream (made on first use)."""
    stream = getattr(_local, "stream", None)
    if stream is None:
        stream = _local.stream = mx.new_stream(mx.cpu)
    return stream


def on_both_cores(
    first: Callable[[], mx.array], second: Callable[[], mx.array], axis: int
) -> mx.array:
    """`first()` built on the current stream and `second()` on the side stream, joined along
    `axis`: two independent halves of one result, computed at once."""
    a = first()
    with mx.stream(side_stream()):
        b = second()
    return mx.concatenate([a, b], axis=axis)
