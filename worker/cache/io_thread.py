"""The SSD cache tier's background thread: writes, touches and deletes cache files.

It never touches MLX: a write job carries raw byte views the MLX thread made (evaluated,
contiguous arrays seen as uint8 buffers), and this thread only streams them into a safetensors
file. One thread, one job queue, one completion queue the MLX thread drains; `close()` finishes
every queued job and joins.

Files: `<dir>/<model dir>/<stem>.safetensors` (the tensors, in the layout mlx-lm's
`save_prompt_cache` writes, so `load_prompt_cache` reads them) and `<stem>.json` (the index:
model key, token ids, ...), written in that order, each to a temporary name and renamed, so an
index file exists only beside a complete tensor file. The whole directory is kept under its
byte cap by deleting the entries with the oldest tensor-file mtime (reads touch it).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

TENSORS = ".safetensors"
INDEX = ".json"
TMP = ".tmp"


@dataclass(frozen=True)
class Tensor:
    """One tensor of a write job: safetensors dtype name, shape and its bytes (C order)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    data: memoryview


@dataclass(frozen=True)
class WriteJob:
    folder: Path
    stem: str
    tensors: Sequence[Tensor]
    metadata: dict[str, str]
    index: dict[str, Any]
    nbytes: int
    delete_after: Sequence[str] = ()  # stems in `folder` superseded once this one is written


@dataclass(frozen=True)
class DeleteJob:
    folder: Path
    stems: Sequence[str]


@dataclass(frozen=True)
class TouchJob:
    folder: Path
    stem: str


@dataclass(frozen=True)
class Done:
    """What a job changed on disk, for the MLX thread's index. `written` is the stem of the
    entry a write job wrote and `failed` the stem of one it could not write; `removed` lists
    the stems deleted, per folder. (It holds no tensors: their memory is freed once written.)"""

    written: str | None = None
    failed: str | None = None
    removed: dict[Path, list[str]] = field(default_factory=dict)


_CLOSE = object()


def write_safetensors(path: Path, tensors: Sequence[Tensor], metadata: dict[str, str]) -> None:
    """Writes a safetensors file from raw buffers (no copy: each view is written as is)."""
    header: dict[str, Any] = {"__metadata__": metadata}
    offset = 0
    for t in tensors:
        header[t.name] = {
            "dtype": t.dtype,
            "shape": list(t.shape),
            "data_offsets": [offset, offset + t.data.nbytes],
        }
        offset += t.data.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the format recommends 8-byte aligned tensor data
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for t in tensors:
            f.write(t.data)


class CacheIoThread:
    """Runs write / touch / delete jobs for the cache files under `root` on one thread."""

    def __init__(self, root: Path, max_bytes: int):
        self.root = root
        self.max_bytes = max_bytes
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[Done] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="prefix-cache-io", daemon=True)
        self._thread.start()

    def submit(self, job: WriteJob | DeleteJob | TouchJob) -> None:
        self._jobs.put(job)

    def drain(self) -> list[Done]:
        """Completed jobs since the last call (never blocks)."""
        done = []
        while True:
            try:
                done.append(self._done.get_nowait())
            except queue.Empty:
                return done

    def close(self, timeout: float | None = None) -> None:
        """Finishes every queued job, then stops the thread."""
        if self._thread.is_alive():
            self._jobs.put(_CLOSE)
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _CLOSE:
                return
            try:
                self._done.put(self._handle(job))
            except Exception as exc:  # a failed job must not end the thread
                log.warning("prefix cache IO job failed: %s", exc, exc_info=True)
                self._done.put(Done(failed=job.stem if isinstance(job, WriteJob) else None))
            # Drop the reference now: a written job's tensors must not wait for the next job.
            del job

    def _handle(self, job: WriteJob | DeleteJob | TouchJob) -> Done:
        if isinstance(job, TouchJob):
            try:
                os.utime(job.folder / (job.stem + TENSORS))
            except FileNotFoundError:  # evicted meanwhile
                pass
            return Done()
        if isinstance(job, DeleteJob):
            return Done(removed={job.folder: _remove(job.folder, job.stems)})
        return self._write(job)

    def _write(self, job: WriteJob) -> Done:
        if job.nbytes > self.max_bytes:
            return Done(failed=job.stem)
        job.folder.mkdir(parents=True, exist_ok=True)
        tensors = job.folder / (job.stem + TENSORS)
        index = job.folder / (job.stem + INDEX)
        try:
            write_safetensors(tensors.with_name(tensors.name + TMP), job.tensors, job.metadata)
            os.replace(tensors.with_name(tensors.name + TMP), tensors)
            index_data = dict(job.index, nbytes=tensors.stat().st_size)
            index.with_name(index.name + TMP).write_text(json.dumps(index_data))
            os.replace(index.with_name(index.name + TMP), index)
        except OSError as exc:
            _remove(job.folder, [job.stem])
            for tmp in (tensors, index):
                tmp.with_name(tmp.name + TMP).unlink(missing_ok=True)
            log.warning("could not write prefix cache file %s: %s", tensors, exc)
            return Done(failed=job.stem)
        removed = {job.folder: _remove(job.folder, job.delete_after)}
        for folder, stems in self._evict(keep=job.stem).items():
            removed.setdefault(folder, []).extend(stems)
        return Done(written=job.stem, removed=removed)

    def _evict(self, keep: str) -> dict[Path, list[str]]:
        """Deletes the oldest entries (by tensor-file mtime) until the directory fits its cap."""
        entries = []  # (mtime, size, folder, stem)
        total = 0
        for folder in (p for p in self.root.iterdir() if p.is_dir()):
            for f in folder.iterdir():
                try:
                    st = f.stat()
                except FileNotFoundError:
                    continue
                total += st.st_size
                if f.name.endswith(TENSORS):
                    entries.append((st.st_mtime_ns, folder, f.name[: -len(TENSORS)]))
        removed: dict[Path, list[str]] = {}
        for _, folder, stem in sorted(entries):
            if total <= self.max_bytes:
                break
            if stem == keep:
                continue
            total -= _entry_size(folder, stem)
            removed.setdefault(folder, []).extend(_remove(folder, [stem]))
        return removed


def _entry_size(folder: Path, stem: str) -> int:
    size = 0
    for suffix in (TENSORS, INDEX):
        try:
            size += (folder / (stem + suffix)).stat().st_size
        except FileNotFoundError:
            pass
    return size


def _remove(folder: Path, stems: Sequence[str]) -> list[str]:
    """Deletes each entry's index first (so it is never listed without its tensors)."""
    for stem in stems:
        (folder / (stem + INDEX)).unlink(missing_ok=True)
        (folder / (stem + TENSORS)).unlink(missing_ok=True)
    return list(stems)
