"""SSD tier of the prefix cache: KV caches persisted as safetensors files, restored on a miss.

Entries survive a worker restart and a swap to another model and back: a new `SsdCacheTier`
over the same directory and model key lists the entries its predecessors wrote. Layout and the
background writer are in `worker.cache.io_thread`; this module is the MLX-thread side: it turns
a cache into byte views (evaluated, contiguous arrays; the only MLX work, done here), keeps the
index of this model's entries, and loads entries back with mlx-lm's `load_prompt_cache`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx_lm.models.cache as mlx_cache
from mlx.utils import tree_flatten
from mlx_lm.models.cache import PromptTrie, can_trim_prompt_cache, load_prompt_cache

from worker.cache.io_thread import (
    INDEX,
    TENSORS,
    TMP,
    CacheIoThread,
    DeleteJob,
    Tensor,
    TouchJob,
    WriteJob,
)
from worker.cache.prefix_match import Reuse, Tokens, continues_exactly, find_reuse, pop_prefixes

log = logging.getLogger(__name__)

FORMAT = "vllm-omni-mlx-prefix-cache-1"
_DTYPES = {
    mx.bool_: "BOOL",
    mx.uint8: "U8",
    mx.uint16: "U16",
    mx.uint32: "U32",
    mx.uint64: "U64",
    mx.int8: "I8",
    mx.int16: "I16",
    mx.int32: "I32",
    mx.int64: "I64",
    mx.float16: "F16",
    mx.bfloat16: "BF16",
    mx.float32: "F32",
}
DEFAULT_MAX_PENDING_BYTES = 2 << 30


@dataclass(frozen=True)
class _DiskEntry:
    stem: str
    trimmable: bool


class SsdCacheTier:
    """Prefix-cache entries of one model on disk under `max_bytes` (whole directory, LRU by
    file mtime). Files are written on a background thread; `find`, `load` and `persist` run on
    the MLX thread. An unreadable, truncated or foreign entry is logged and ignored."""

    def __init__(
        self,
        directory: str | Path,
        max_bytes: int,
        model_key: str,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
    ):
        self.directory = Path(directory)
        self.max_bytes = max(0, int(max_bytes))
        self.model_key = model_key
        self.max_pending_bytes = max_pending_bytes
        # One folder per model: a listing never even sees another model's entries.
        self.folder = self.directory / hashlib.sha256(model_key.encode()).hexdigest()[:16]
        self.folder.mkdir(parents=True, exist_ok=True)
        self._trie = PromptTrie()
        self._entries: dict[Tokens, _DiskEntry] = {}
        self._by_stem: dict[str, Tokens] = {}
        self._pending: dict[str, tuple[Tokens, bool, int]] = {}  # stem -> tokens, trimmable, bytes
        # Pending writes a later trimmable entry supersedes: not indexed once written (the later
        # job, queued after them, deletes their files).
        self._superseded: set[str] = set()
        # stem of a queued write -> the stems it supersedes (their files go if it fails)
        self._supersedes: dict[str, list[str]] = {}
        self._counts = dict.fromkeys(
            ("writes", "write_failures", "skipped", "restores", "corrupt"), 0
        )
        self._closed = False
        unreadable = self._scan()
        self._io = CacheIoThread(self.directory, self.max_bytes)
        if unreadable:
            self._io.submit(DeleteJob(self.folder, unreadable))

    def find(self, tokens: Sequence[int]) -> Reuse | None:
        """The best reuse among this model's entries on disk (see `prefix_match.find_reuse`)."""
        self._apply_done()
        return find_reuse(self._trie, self.model_key, tokens, lambda e: self._entries[e].trimmable)

    def load(self, entry: Tokens) -> list[Any] | None:
        """The cache stored for exactly `entry`, read and evaluated on this (MLX) thread; None
        (logged, entry dropped) if it is missing, truncated, corrupt or another model's."""
        self._apply_done()
        disk = self._entries.get(entry)
        if disk is None:
            return None
        path = self.folder / (disk.stem + TENSORS)
        try:
            cache, metadata = load_prompt_cache(str(path), return_metadata=True)
            if metadata.get("model_key") != self.model_key:
                raise ValueError(f"written for model {metadata.get('model_key')!r}")
            mx.eval([c.state for c in cache])
        except Exception as exc:
            self._counts["corrupt"] += 1
            log.warning("ignoring unreadable prefix cache file %s: %s", path, exc)
            self._forget(disk.stem)
            self._io.submit(DeleteJob(self.folder, [disk.stem]))
            return None
        self._counts["restores"] += 1
        self._io.submit(TouchJob(self.folder, disk.stem))
        return cache

    def persist(self, tokens: Sequence[int], cache: list[Any]) -> None:
        """Queues `cache` (the cache of exactly `tokens`) to be written; returns at once. Makes
        byte views of the evaluated arrays here; the file is written on the IO thread."""
        self._apply_done()
        if self._closed:
            return
        key = tuple(tokens)
        stem = _stem(self.model_key, key)
        if key in self._entries:
            self._io.submit(TouchJob(self.folder, stem))
            return
        if stem in self._pending:
            return
        if not continues_exactly(cache):
            self._counts["skipped"] += 1
            return
        try:
            tensors, metadata = _to_tensors(cache, {"model_key": self.model_key, "format": FORMAT})
        except (TypeError, ValueError) as exc:
            self._counts["skipped"] += 1
            log.debug("prefix cache entry not persisted: %s", exc)
            return
        nbytes = sum(t.data.nbytes for t in tensors)
        pending = sum(p[2] for p in self._pending.values())
        if nbytes > self.max_bytes or (self._pending and pending + nbytes > self.max_pending_bytes):
            self._counts["skipped"] += 1
            return
        trimmable = can_trim_prompt_cache(cache)
        superseded = []
        if trimmable:
            # A trimmable entry serves all its prefixes: the files of those are dropped once
            # this one is on disk (and no longer offered meanwhile).
            for prefix in pop_prefixes(self._trie, self.model_key, key):
                superseded.append(self._entries[prefix].stem)
                self._forget(self._entries[prefix].stem, in_trie=False)
            # Prefixes still being written (the IO thread is behind) are superseded as well.
            for pending_stem, (pending_key, _, _) in self._pending.items():
                if len(pending_key) < len(key) and key[: len(pending_key)] == pending_key:
                    superseded.append(pending_stem)
                    self._superseded.add(pending_stem)
        index = {
            "format": FORMAT,
            "model_key": self.model_key,
            "trimmable": trimmable,
            "tokens": list(key),
        }
        self._pending[stem] = (key, trimmable, nbytes)
        if superseded:
            self._supersedes[stem] = superseded
        job = WriteJob(self.folder, stem, tensors, metadata, index, nbytes, superseded)
        self._io.submit(job)

    def entry_path(self, tokens: Sequence[int]) -> Path | None:
        """The tensor file of the entry stored for exactly `tokens`, if it is on disk."""
        self._apply_done()
        disk = self._entries.get(tuple(tokens))
        return None if disk is None else self.folder / (disk.stem + TENSORS)

    def stats(self) -> dict[str, int]:
        """entries, bytes (of this model's entries), pending writes and event counters."""
        self._apply_done()
        size = 0
        for disk in self._entries.values():
            try:
                size += (self.folder / (disk.stem + TENSORS)).stat().st_size
            except FileNotFoundError:
                pass
        return {
            "entries": len(self._entries),
            "bytes": size,
            "pending": len(self._pending),
            **self._counts,
        }

    def close(self) -> None:
        """Writes everything queued, then stops the IO thread."""
        self._closed = True
        self._io.close()
        self._apply_done()

    def _apply_done(self) -> None:
        for done in self._io.drain():
            if done.written is not None:
                key, trimmable, _ = self._pending.pop(done.written)
                self._supersedes.pop(done.written, None)
                self._counts["writes"] += 1
                if done.written in self._superseded:
                    self._superseded.discard(done.written)
                else:
                    self._add(key, _DiskEntry(done.written, trimmable))
            if done.failed is not None:
                self._pending.pop(done.failed)
                self._superseded.discard(done.failed)
                # Its prefixes were dropped for it: their files go too (no unindexed leftovers).
                dropped = self._supersedes.pop(done.failed, [])
                if dropped and not self._closed:  # closed: a later start indexes them again
                    self._io.submit(DeleteJob(self.folder, dropped))
                self._counts["write_failures"] += 1
            for stem in done.removed.get(self.folder, ()):
                self._forget(stem)

    def _add(self, key: Tokens, disk: _DiskEntry) -> None:
        self._trie.add(self.model_key, list(key), key)
        self._entries[key] = disk
        self._by_stem[disk.stem] = key

    def _forget(self, stem: str, in_trie: bool = True) -> None:
        key = self._by_stem.pop(stem, None)
        if key is None:
            return
        del self._entries[key]
        if in_trie:
            self._trie.pop(self.model_key, list(key))

    def _scan(self) -> list[str]:
        """Indexes the entries already on disk (written by an earlier worker); returns the
        stems of unreadable ones."""
        unreadable = []
        for leftover in self.folder.glob("*" + TMP):
            leftover.unlink(missing_ok=True)
        for index in sorted(self.folder.glob("*" + INDEX)):
            stem = index.name[: -len(INDEX)]
            try:
                data = json.loads(index.read_text())
                tokens = tuple(int(t) for t in data["tokens"])
                if data.get("model_key") != self.model_key or data.get("format") != FORMAT:
                    raise ValueError("written for another model or format")
                if stem != _stem(self.model_key, tokens) or not tokens:
                    raise ValueError("name does not match its tokens")
                size = (self.folder / (stem + TENSORS)).stat().st_size
                if size != data["nbytes"]:
                    raise ValueError(f"tensor file has {size} bytes, index says {data['nbytes']}")
                self._add(tokens, _DiskEntry(stem, bool(data["trimmable"])))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                self._counts["corrupt"] += 1
                log.warning("ignoring unreadable prefix cache entry %s: %s", index, exc)
                unreadable.append(stem)
        return unreadable


def _stem(model_key: str, tokens: Tokens) -> str:
    digest = hashlib.sha256(model_key.encode())
    digest.update(b"".join(t.to_bytes(4, "little", signed=False) for t in tokens))
    return digest.hexdigest()[:32]


def _to_tensors(cache: list[Any], metadata: dict[str, str]) -> tuple[list[Tensor], dict[str, str]]:
    """The safetensors content `mlx_lm.models.cache.save_prompt_cache` would write for `cache`,
    as byte views: same tensor names, same metadata layout, so `load_prompt_cache` reads it."""
    classes = [type(c).__name__ for c in cache]
    for name in classes:
        # load_prompt_cache rebuilds caches by class name from mlx-lm's cache module only.
        if not isinstance(getattr(mlx_cache, name, None), type):
            raise ValueError(f"cache class {name} cannot be restored by mlx-lm")
    scalars: list[Any] = [""]  # must be non-empty, as in save_prompt_cache
    arrays: dict[str, mx.array] = {}
    for name, value in tree_flatten([c.state for c in cache]):
        if isinstance(value, mx.array):
            arrays[name] = value
        elif isinstance(value, (bool, int, float)):
            scalars.append((name, "scalar"))
            arrays[name] = mx.array(value)
        elif isinstance(value, str):
            scalars.append((name, "string"))
            arrays[name] = mx.array([ord(ch) for ch in value])
        elif value is None:
            scalars.append((name, "none"))
            arrays[name] = mx.array([])
        else:
            raise TypeError(f"cache state of type {type(value).__name__} is not serializable")
    header = dict(tree_flatten([metadata, classes, scalars]))
    # Contiguous flat uint8 views share the arrays' memory: no copy of the KV data.
    views = {name: mx.contiguous(a).reshape(-1).view(mx.uint8) for name, a in arrays.items()}
    mx.eval(list(views.values()))
    tensors = []
    for name, array in arrays.items():
        if array.dtype not in _DTYPES:
            raise TypeError(f"cache arrays of dtype {array.dtype} are not supported")
        tensors.append(
            Tensor(name, _DTYPES[array.dtype], tuple(array.shape), memoryview(views[name]))
        )
    return tensors, header
