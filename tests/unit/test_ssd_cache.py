"""SsdCacheTier on real mlx-lm caches of the tiny Qwen3: entries survive a new worker (a fresh
PrefixCache over the same directory), stay per model, keep the directory under its cap, skip
damaged files and are written off the calling thread."""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from pathlib import Path

import mlx.core as mx
import pytest
from mlx_lm import load
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import RotatingKVCache, load_prompt_cache, make_prompt_cache

import worker.cache.io_thread as cache_io_thread
from worker.cache.prefix_cache import PrefixCache
from worker.cache.ssd_cache import SsdCacheTier
from worker.tiny_models import ensure_checkpoint

BIG = 1 << 30
KEY = "model-a"


@pytest.fixture(scope="module")
def model():
    model, _ = load(str(ensure_checkpoint("qwen3")))
    return model


def tokens(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(10, 4000) for _ in range(n)]


def prefill(model, prompt: list[int], cache: list | None = None) -> list:
    cache = make_prompt_cache(model) if cache is None else cache
    model(mx.array(prompt)[None], cache=cache)
    mx.eval([c.state for c in cache])
    return cache


def greedy(model, prompt: list[int], cache: list | None = None, n: int = 10) -> list[int]:
    cache = make_prompt_cache(model) if cache is None else cache
    return [t for t, _ in generate_step(mx.array(prompt), model, prompt_cache=cache, max_tokens=n)]


def worker_cache(directory: Path, key: str = KEY, ssd_bytes: int = BIG, mem: int = BIG):
    """What a (re)started worker builds: a fresh memory cache over the SSD directory."""
    return PrefixCache(mem, key, SsdCacheTier(directory, ssd_bytes, key))


def write_entries(directory: Path, model, prompts: list[list[int]], key: str = KEY) -> None:
    pc = worker_cache(directory, key)
    for prompt in prompts:
        pc.insert(prompt, prefill(model, prompt))
    pc.ssd.close()


def tensor_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*/*.safetensors"))


def test_a_new_worker_restores_entries_with_identical_greedy_continuations(model, tmp_path):
    history, follow_up = tokens(40, 1), tokens(12, 2)
    cache = make_prompt_cache(model)
    reply = greedy(model, history, cache, n=8)
    first = worker_cache(tmp_path)
    first.insert(history + reply, cache)
    first.ssd.close()

    second = worker_cache(tmp_path)
    turn2 = history + reply + follow_up
    cached, remaining = second.fetch(turn2)
    assert remaining == follow_up
    assert greedy(model, remaining, cached) == greedy(model, turn2)
    assert second.stats()["ssd_restores"] == 1


def test_entries_are_not_restored_for_another_model_key(model, tmp_path):
    prompt = tokens(30, 1)
    write_entries(tmp_path, model, [prompt], key="model-a")
    other = worker_cache(tmp_path, key="model-b")
    assert other.fetch(prompt + [5]) == (None, prompt + [5])


def test_entries_survive_a_swap_to_another_model_and_back(model, tmp_path):
    prompt_a, prompt_b = tokens(30, 1), tokens(30, 2)
    write_entries(tmp_path, model, [prompt_a], key="model-a")
    write_entries(tmp_path, model, [prompt_b], key="model-b")
    back = worker_cache(tmp_path, key="model-a")
    cached, remaining = back.fetch(prompt_a + [5])
    assert remaining == [5]
    assert greedy(model, remaining, cached) == greedy(model, prompt_a + [5])


def test_files_load_with_mlx_lm_load_prompt_cache(model, tmp_path):
    prompt = tokens(30, 1)
    original = prefill(model, prompt)
    keys = mx.array(original[0].keys)
    write_entries(tmp_path, model, [prompt])
    (path,) = tensor_files(tmp_path)
    restored = load_prompt_cache(str(path))
    assert restored[0].offset == 30
    assert mx.array_equal(restored[0].keys, keys).item()


def test_a_sliding_window_cache_is_restored_exactly(model, tmp_path):
    history, tail = tokens(40, 1), tokens(6, 2)
    window = [RotatingKVCache(max_size=16, keep=0) for _ in model.layers]
    first = worker_cache(tmp_path)
    first.insert(history, prefill(model, history, window))
    first.ssd.close()
    cached, remaining = worker_cache(tmp_path).fetch(history + tail)
    cold = greedy(
        model, history + tail, [RotatingKVCache(max_size=16, keep=0) for _ in model.layers]
    )
    assert greedy(model, remaining, cached) == cold


def test_an_entry_too_large_for_memory_is_served_from_disk(model, tmp_path):
    prompt = tokens(30, 1)
    first = worker_cache(tmp_path, mem=0)
    first.insert(prompt, prefill(model, prompt))
    first.ssd.close()
    cached, remaining = worker_cache(tmp_path, mem=0).fetch(prompt + [5])
    assert (cached[0].offset, remaining) == (30, [5])


def test_the_directory_stays_under_its_byte_cap(model, tmp_path):
    write_entries(tmp_path, model, [tokens(20, 1)])
    entry_bytes = sum(f.stat().st_size for f in tmp_path.glob("*/*"))
    cap = int(entry_bytes * 2.5)
    pc = worker_cache(tmp_path, ssd_bytes=cap)
    for seed in (2, 3, 4):
        pc.insert(tokens(20, seed), prefill(model, tokens(20, seed)))
    pc.ssd.close()
    assert sum(f.stat().st_size for f in tmp_path.glob("*/*")) <= cap
    assert len(tensor_files(tmp_path)) == 2
    assert pc.ssd.stats()["entries"] == 2


def test_restoring_an_entry_makes_it_the_last_to_be_evicted(model, tmp_path):
    a, b, c = tokens(20, 1), tokens(20, 2), tokens(20, 3)
    write_entries(tmp_path, model, [a, b])
    entry_bytes = sum(f.stat().st_size for f in tmp_path.glob("*/*")) // 2
    now = time.time()
    for age, path in zip((200, 100), tensor_files_by_prompt(tmp_path, [a, b]), strict=True):
        os.utime(path, (now - age, now - age))  # a is older than b ...
    pc = worker_cache(tmp_path, ssd_bytes=int(entry_bytes * 2.5))
    assert pc.fetch(a + [5])[0] is not None  # ... until it is read
    pc.insert(c, prefill(model, c))
    pc.ssd.close()
    fresh = worker_cache(tmp_path, mem=0)
    assert fresh.fetch(a + [5])[0] is not None
    assert fresh.fetch(b + [5])[0] is None


def tensor_files_by_prompt(directory: Path, prompts: list[list[int]]) -> list[Path]:
    tier = SsdCacheTier(directory, BIG, KEY)
    tier.close()
    return [tier.entry_path(p) for p in prompts]


def test_a_truncated_file_is_ignored_and_logged(model, tmp_path, caplog):
    prompt = tokens(30, 1)
    write_entries(tmp_path, model, [prompt])
    (path,) = tensor_files(tmp_path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with caplog.at_level(logging.WARNING, logger="worker.cache.ssd_cache"):
        pc = worker_cache(tmp_path)
        assert pc.fetch(prompt + [5])[0] is None
    assert "unreadable prefix cache" in caplog.text


def test_a_corrupt_file_is_ignored_logged_and_deleted(model, tmp_path, caplog):
    prompt = tokens(30, 1)
    write_entries(tmp_path, model, [prompt])
    (path,) = tensor_files(tmp_path)
    path.write_bytes(b"\xff" * path.stat().st_size)  # same size: only reading finds out
    with caplog.at_level(logging.WARNING, logger="worker.cache.ssd_cache"):
        pc = worker_cache(tmp_path)
        assert pc.fetch(prompt + [5]) == (None, prompt + [5])
        pc.ssd.close()
    assert "unreadable prefix cache" in caplog.text
    assert tensor_files(tmp_path) == []


def test_writes_happen_off_the_calling_thread(model, tmp_path, monkeypatch):
    release, writers = threading.Event(), []
    real_write = cache_io_thread.write_safetensors

    def slow_write(*args, **kwargs):
        writers.append(threading.current_thread())
        release.wait(10)
        real_write(*args, **kwargs)

    monkeypatch.setattr(cache_io_thread, "write_safetensors", slow_write)
    pc = worker_cache(tmp_path)
    pc.insert(tokens(30, 1), prefill(model, tokens(30, 1)))
    assert tensor_files(tmp_path) == []  # insert returned while the writer waits
    release.set()
    pc.ssd.close()
    assert len(tensor_files(tmp_path)) == 1
    assert writers and threading.current_thread() not in writers


def test_a_longer_trimmable_entry_replaces_its_prefix_on_disk(model, tmp_path):
    short = tokens(20, 1)
    write_entries(tmp_path, model, [short, short + tokens(10, 2)])
    assert len(tensor_files(tmp_path)) == 1
    cached, remaining = worker_cache(tmp_path, mem=0).fetch(short + [5])
    assert (cached[0].offset, remaining) == (20, [5])


def test_a_longer_entry_supersedes_a_prefix_still_being_written(model, tmp_path, monkeypatch):
    """The IO thread may not have written the short entry yet when the longer one comes (a
    loaded machine): the short one's file is still replaced, and never indexed."""
    release = threading.Event()
    real_write = cache_io_thread.write_safetensors

    def slow_write(*args, **kwargs):
        release.wait(10)
        real_write(*args, **kwargs)

    monkeypatch.setattr(cache_io_thread, "write_safetensors", slow_write)
    short = tokens(20, 1)
    pc = worker_cache(tmp_path)
    pc.insert(short, prefill(model, short))
    pc.insert(short + tokens(10, 2), prefill(model, short + tokens(10, 2)))
    release.set()
    pc.ssd.close()
    assert len(tensor_files(tmp_path)) == 1
    assert pc.ssd.stats()["entries"] == 1
    cached, remaining = worker_cache(tmp_path, mem=0).fetch(short + [5])
    assert (cached[0].offset, remaining) == (20, [5])


def test_leftover_temporary_files_are_removed_at_start(tmp_path):
    tier = SsdCacheTier(tmp_path, BIG, KEY)
    tier.close()
    leftover = tier.folder / "abc.safetensors.tmp"
    leftover.write_bytes(b"partial")
    SsdCacheTier(tmp_path, BIG, KEY).close()
    assert not leftover.exists()
