"""PrefixCache on real mlx-lm caches of the tiny Qwen3: reuse, trimming, privacy, LRU budget,
rotating caches, model keys; and the rule that matters most: cache on == cache off."""

from __future__ import annotations

import random

import mlx.core as mx
import pytest
from mlx_lm import load
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import RotatingKVCache, make_prompt_cache

from worker.cache.prefix_cache import PrefixCache, model_key
from worker.cache.prefix_match import cache_nbytes
from worker.tiny_models import ensure_checkpoint

BIG = 1 << 30


@pytest.fixture(scope="module")
def model():
    model, _ = load(str(ensure_checkpoint("qwen3")))
    return model


def tokens(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(10, 4000) for _ in range(n)]


def prefill(model, prompt: list[int], cache: list | None = None) -> list:
    """A cache holding exactly `prompt`."""
    cache = make_prompt_cache(model) if cache is None else cache
    model(mx.array(prompt)[None], cache=cache)
    mx.eval([c.state for c in cache])
    return cache


def greedy(model, prompt: list[int], cache: list | None = None, n: int = 10) -> list[int]:
    cache = make_prompt_cache(model) if cache is None else cache
    return [t for t, _ in generate_step(mx.array(prompt), model, prompt_cache=cache, max_tokens=n)]


def offset(cache: list) -> int:
    return cache[0].offset


def test_fetch_returns_the_longest_stored_prefix_and_the_rest(model):
    system, first, second, more = tokens(30, 1), tokens(12, 2), tokens(20, 3), tokens(7, 4)
    pc = PrefixCache(BIG, "m")
    pc.insert(system + first, prefill(model, system + first))
    pc.insert(system + second, prefill(model, system + second))
    cache, remaining = pc.fetch(system + second + more)
    assert remaining == more
    assert offset(cache) == len(system + second)


def test_miss_returns_no_cache_and_every_token(model):
    pc = PrefixCache(BIG, "m")
    pc.insert(tokens(20, 1), prefill(model, tokens(20, 1)))
    assert pc.fetch(tokens(20, 2)) == (None, tokens(20, 2))
    assert pc.stats()["misses"] == 1


def test_continuing_from_the_cache_gives_the_cold_greedy_tokens(model):
    history, reply, follow_up = tokens(40, 1), [], tokens(15, 2)
    cache = make_prompt_cache(model)
    reply = greedy(model, history, cache, n=8)  # the cache now holds history + reply
    pc = PrefixCache(BIG, "m")
    pc.insert(history + reply, cache)
    turn2 = history + reply + follow_up
    cached, remaining = pc.fetch(turn2)
    assert remaining == follow_up
    assert greedy(model, remaining, cached) == greedy(model, turn2)


def test_a_divergent_prompt_reuses_the_common_prefix_by_trimming(model):
    common, old_tail, new_tail = tokens(25, 1), tokens(10, 2), tokens(6, 3)
    pc = PrefixCache(BIG, "m")
    pc.insert(common + old_tail, prefill(model, common + old_tail))
    cached, remaining = pc.fetch(common + new_tail)
    assert (offset(cached), remaining) == (len(common), new_tail)
    assert greedy(model, remaining, cached) == greedy(model, common + new_tail)


def test_an_exact_match_still_leaves_the_last_token_to_prefill(model):
    prompt = tokens(20, 1)
    pc = PrefixCache(BIG, "m")
    pc.insert(prompt, prefill(model, prompt))
    cached, remaining = pc.fetch(prompt)
    assert (offset(cached), remaining) == (19, prompt[-1:])
    assert greedy(model, remaining, cached) == greedy(model, prompt)


def test_a_one_token_prompt_is_never_served_from_the_cache(model):
    pc = PrefixCache(BIG, "m")
    pc.insert([7], prefill(model, [7]))
    assert pc.fetch([7]) == (None, [7])


def test_a_fetched_cache_is_a_private_copy(model):
    prompt, tail = tokens(30, 1), tokens(5, 2)
    pc = PrefixCache(BIG, "m")
    pc.insert(prompt, prefill(model, prompt))
    first, _ = pc.fetch(prompt + tail)
    greedy(model, tokens(9, 3), first, n=20)  # writes 28 other tokens into the copy
    second, remaining = pc.fetch(prompt + tail)
    assert offset(second) == len(prompt)
    assert greedy(model, remaining, second) == greedy(model, prompt + tail)


def test_the_reuse_is_counted(model):
    prompt = tokens(20, 1)
    pc = PrefixCache(BIG, "m")
    pc.insert(prompt, prefill(model, prompt))
    pc.fetch(prompt + [5, 6])
    stats = pc.stats()
    assert (stats["hits"], stats["tokens_reused"], stats["entries"]) == (1, 20, 1)


def test_least_recently_used_entries_are_evicted_past_the_byte_budget(model):
    a, b, c = tokens(20, 1), tokens(20, 2), tokens(20, 3)
    entry_bytes = cache_nbytes(prefill(model, a))
    pc = PrefixCache(int(entry_bytes * 2.5), "m")
    pc.insert(a, prefill(model, a))
    pc.insert(b, prefill(model, b))
    pc.fetch(a + [1])  # a is now more recently used than b
    pc.insert(c, prefill(model, c))
    assert pc.fetch(b + [1])[0] is None
    assert pc.fetch(a + [1])[0] is not None
    stats = pc.stats()
    assert (stats["evictions"], stats["entries"], stats["bytes"]) == (1, 2, 2 * entry_bytes)


def test_an_entry_larger_than_the_budget_is_not_stored(model):
    prompt = tokens(20, 1)
    cache = prefill(model, prompt)
    pc = PrefixCache(cache_nbytes(cache) - 1, "m")
    pc.insert(prompt, cache)
    assert pc.fetch(prompt + [1])[0] is None
    assert (pc.stats()["entries"], pc.stats()["refused"]) == (0, 1)


def test_a_longer_trimmable_entry_replaces_its_prefixes(model):
    short, longer = tokens(20, 1), tokens(20, 1) + tokens(10, 2)
    pc = PrefixCache(BIG, "m")
    pc.insert(short, prefill(model, short))
    pc.insert(longer, prefill(model, longer))
    assert pc.stats()["entries"] == 1
    cached, remaining = pc.fetch(short + [9])
    assert (offset(cached), remaining) == (20, [9])


def sliding(model, size: int = 16) -> list:
    """What sliding-window models build: rotating caches that keep no leading tokens."""
    return [RotatingKVCache(max_size=size, keep=0) for _ in model.layers]


def test_a_wrapped_sliding_window_cache_is_reused_at_its_exact_boundary(model):
    history, tail = tokens(40, 1), tokens(6, 2)
    pc = PrefixCache(BIG, "m")
    pc.insert(history, prefill(model, history, sliding(model)))
    cached, remaining = pc.fetch(history + tail)
    assert remaining == tail
    assert greedy(model, remaining, cached) == greedy(model, history + tail, sliding(model))


def test_a_wrapped_sliding_window_cache_is_not_trimmed_on_divergence(model):
    history = tokens(40, 1)
    pc = PrefixCache(BIG, "m")
    pc.insert(history, prefill(model, history, sliding(model)))
    assert pc.fetch(history[:30] + tokens(6, 2))[0] is None
    assert pc.fetch(history)[0] is None  # only by trimming its last token


def test_a_sliding_window_cache_that_has_not_wrapped_is_trimmed(model):
    history, tail = tokens(10, 1), tokens(4, 2)
    pc = PrefixCache(BIG, "m")
    pc.insert(history, prefill(model, history, sliding(model)))
    cached, remaining = pc.fetch(history[:6] + tail)
    assert remaining == tail
    assert greedy(model, remaining, cached) == greedy(model, history[:6] + tail, sliding(model))


def test_a_wrapped_max_kv_size_cache_is_not_stored_as_it_would_change_outputs(model):
    # make_prompt_cache(max_kv_size=) keeps 4 leading tokens, which a cold prefill's window
    # hides: continuing from such a cache gives other tokens than a cold prefill.
    history = tokens(40, 1)
    pc = PrefixCache(BIG, "m")
    pc.insert(history, prefill(model, history, make_prompt_cache(model, max_kv_size=16)))
    assert pc.fetch(history + [5])[0] is None
    assert pc.stats()["inexact"] == 1


def test_a_max_kv_size_cache_that_has_not_wrapped_is_reused(model):
    history, tail = tokens(10, 1), tokens(4, 2)
    pc = PrefixCache(BIG, "m")
    pc.insert(history, prefill(model, history, make_prompt_cache(model, max_kv_size=16)))
    cached, remaining = pc.fetch(history + tail)
    assert remaining == tail
    cold = greedy(model, history + tail, make_prompt_cache(model, max_kv_size=16))
    assert greedy(model, remaining, cached) == cold


def test_a_cache_for_another_model_key_refuses_that_models_ssd_tier():
    class Tier:
        model_key = "other"

    with pytest.raises(ValueError, match="other"):
        PrefixCache(BIG, "m", ssd=Tier())  # type: ignore[arg-type]


def test_model_keys_differ_by_weights_and_settings(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"1234")
    plain = model_key(tmp_path)
    assert model_key(tmp_path) == plain
    assert model_key(tmp_path, kv_bits=8) != plain
    (tmp_path / "model.safetensors").write_bytes(b"12345")
    assert model_key(tmp_path) != plain


def test_a_cache_holding_fewer_tokens_than_claimed_is_refused(model):
    prompt = tokens(20, 1)
    pc = PrefixCache(BIG, "m")
    pc.insert(prompt + [5], prefill(model, prompt))
    assert pc.fetch(prompt + [5, 6])[0] is None
    assert pc.stats()["mismatched"] == 1


def test_a_cache_holding_more_tokens_than_claimed_is_trimmed_to_them(model):
    prompt, tail = tokens(20, 1), tokens(5, 2)
    pc = PrefixCache(BIG, "m")
    pc.insert(prompt, prefill(model, prompt + [7]))  # e.g. a last generated token fed back
    cached, remaining = pc.fetch(prompt + tail)
    assert (offset(cached), remaining) == (20, tail)
    assert greedy(model, remaining, cached) == greedy(model, prompt + tail)


def test_clear_drops_every_entry(model):
    prompt = tokens(20, 1)
    pc = PrefixCache(BIG, "m")
    pc.insert(prompt, prefill(model, prompt))
    pc.clear()
    assert pc.fetch(prompt + [1])[0] is None
    assert (pc.stats()["entries"], pc.stats()["bytes"]) == (0, 0)
