"""A batch KV cache whose rows start at position 0 and each end at a length of their own.

mlx-lm's `BatchKVCache` right-aligns its rows (padding on the left) and trims all of them by
the same count. Speculative decoding verifies a different number of proposed tokens in each
row and keeps a different number: cutting row i back by its own count there means moving the
row's whole KV history (a roll), every step. Here the rows are left-aligned instead: a row's
keys sit at positions 0 .. length-1, a write lands at each row's own length (a scatter), and
trimming a row is lowering its length. What lies past a row's length is never attended to: the
mask lets the query at position p see keys 0 .. p only, and p < length for every real token.

Same interface as `BatchKVCache` where the generation batch and the models use it: `offset`
(each row's position, for RoPE), `update_and_fetch`, `make_mask`, `filter`, `extend`,
`extract`, `trim`, `state`. Rows arrive from the prompt batch as a `BatchKVCache` and are
converted once (`from_batch`, a gather of the joining rows only). Measured on the real
Qwen2.5-Coder-0.5B's KV shape (24 layers, B=8, W=5, 2-core CPU): writing a verification and
rewinding rows by different counts took 2-3 ms here whatever the context, against 136 / 335 /
1,763 ms at 500 / 2,000 / 8,000 tokens for mlx-lm's roll (docs/benchmarks.md).
"""

from __future__ import annotations

from typing import Any, cast

import mlx.core as mx
from mlx_lm.models.cache import BatchKVCache, KVCache, _BaseCache

STEP = 256  # positions added at a time, as mlx-lm's caches grow


class RaggedKVCache(_BaseCache):
    """Per-row lengths; see the module docstring."""

    def __init__(self, lengths: list[int]) -> None:
        # (B, heads, room, head dim), None until the first write (as mlx-lm's caches)
        self.keys: Any = None
        self.values: Any = None
        self.lengths = list(lengths)
        self.offset = mx.array(self.lengths, dtype=mx.int32)

    @classmethod
    def from_batch(cls, cache: BatchKVCache) -> RaggedKVCache:
        """The rows of a (finalized) BatchKVCache, each moved to start at position 0."""
        if cache.keys is None:
            return cls([0] * cache.offset.shape[0])
        padding = cache.left_padding.tolist()
        lengths = [cache._idx - p for p in padding]
        ragged = cls(lengths)
        if any(padding):
            span = cache.keys.shape[2]
            index = mx.minimum(mx.arange(span)[None] + cache.left_padding[:, None], span - 1)
            index = index[:, None, :, None]
            ragged.keys = mx.take_along_axis(cache.keys, index, axis=2)
            ragged.values = mx.take_along_axis(cache.values, index, axis=2)
        else:
            ragged.keys, ragged.values = cache.keys, cache.values
        return ragged

    def _reserve(self, end: int, like_keys: mx.array, like_values: mx.array) -> None:
        """Room for `end` positions in every row."""
        have = 0 if self.keys is None else self.keys.shape[2]
        if end <= have:
            return
        grow = -(-(end - have) // STEP) * STEP
        batch, heads = like_keys.shape[:2]
        new_k = mx.zeros((batch, heads, grow, like_keys.shape[3]), like_keys.dtype)
        new_v = mx.zeros((batch, heads, grow, like_values.shape[3]), like_values.dtype)
        if self.keys is None:
            self.keys, self.values = new_k, new_v
        else:
            self.keys = mx.concatenate([self.keys, new_k], axis=2)
            self.values = mx.concatenate([self.values, new_v], axis=2)

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        width = keys.shape[2]
        end = max(self.lengths) + width
        self._reserve(end, keys, values)
        if min(self.lengths) == end - width:  # every row at the same length: a plain slice
            start = end - width
            self.keys[..., start:end, :] = keys
            self.values[..., start:end, :] = values
        else:
            index = (self.offset[:, None] + mx.arange(width))[:, None, :, None]
            self.keys = mx.put_along_axis(self.keys, index, keys, axis=2)
            self.values = mx.put_along_axis(self.values, index, values, axis=2)
        self.lengths = [n + width for n in self.lengths]
        self.offset = self.offset + width
        return self.keys[..., :end, :], self.values[..., :end, :]

    def make_mask(self, N: int, return_array: bool = False, **kwargs: Any) -> mx.array:
        """(B, 1, N, max length + N): the query at row position p sees keys 0 .. p."""
        if kwargs.get("window_size") is not None:
            raise ValueError("a ragged KV cache has no sliding window")
        span = max(self.lengths) + N
        queries = self.offset[:, None] + mx.arange(N)
        return (mx.arange(span)[None, None] <= queries[:, :, None])[:, None]

    def trim(self, n: int) -> int:
        """Drops the last `n` positions of every row (mlx-lm's trim_prompt_cache)."""
        n = min(n, min(self.lengths)) if self.lengths else 0
        self.trim_rows([n] * len(self.lengths))
        return n

    def trim_rows(self, counts: list[int]) -> None:
        """Drops the last counts[i] positions of row i."""
        self.lengths = [n - min(c, n) for n, c in zip(self.lengths, counts, strict=True)]
        self.offset = mx.array(self.lengths, dtype=mx.int32)

    def is_trimmable(self) -> bool:
        return True

    def size(self) -> int:
        return max(self.lengths, default=0)

    def empty(self) -> bool:
        return self.keys is None

    @property
    def nbytes(self) -> int:
        if self.keys is None:
            return 0
        return self.keys.nbytes + self.values.nbytes

    @property
    def state(self) -> tuple:
        return self.keys, self.values, self.offset

    @state.setter
    def state(self, v: tuple) -> None:
        self.keys, self.values, self.offset = v
        self.lengths = cast(list[int], self.offset.tolist())

    def filter(self, batch_indices: list[int]) -> None:
        """Keeps these rows, in this order; gives back room no kept row uses."""
        self.lengths = [self.lengths[i] for i in batch_indices]
        self.offset = mx.array(self.lengths, dtype=mx.int32)
        if self.keys is None:
            return
        index = mx.array(batch_indices)
        span = -(-max(self.lengths, default=0) // STEP) * STEP
        self.keys = self.keys[index, :, :span]
        self.values = self.values[index, :, :span]

    def extend(self, other: RaggedKVCache | BatchKVCache) -> None:
        """Appends the rows of `other` (a BatchKVCache is converted first)."""
        if isinstance(other, BatchKVCache):
            other = RaggedKVCache.from_batch(other)
        if other.keys is not None or self.keys is not None:
            like = self if self.keys is not None else other
            span = max(c.keys.shape[2] for c in (self, other) if c.keys is not None)
            self.keys = mx.concatenate([_widen(c, "keys", like, span) for c in (self, other)])
            self.values = mx.concatenate([_widen(c, "values", like, span) for c in (self, other)])
        self.lengths = self.lengths + other.lengths
        self.offset = mx.array(self.lengths, dtype=mx.int32)

    def extract(self, idx: int) -> KVCache:
        """Row `idx` as a plain KVCache (what the prefix cache stores)."""
        cache = KVCache()
        length = self.lengths[idx]
        if self.keys is not None and length:
            cache.keys = mx.contiguous(self.keys[idx : idx + 1, :, :length])
            cache.values = mx.contiguous(self.values[idx : idx + 1, :, :length])
            cache.offset = length
        return cache


def _widen(cache: RaggedKVCache, name: str, like: RaggedKVCache, span: int) -> mx.array:
    """cache.keys / values with `span` positions (zeros where it had none)."""
    array = getattr(cache, name)
    template = getattr(like, name)
    if array is None:
        shape = (len(cache.lengths), template.shape[1], span, template.shape[3])
        return mx.zeros(shape, template.dtype)
    if array.shape[2] < span:
        return mx.pad(array, [(0, 0), (0, 0), (0, span - array.shape[2]), (0, 0)])
    return array
