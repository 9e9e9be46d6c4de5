"""Per-request samplers and logits processors, built from protocol.SamplingParams.

Greedy is mlx-lm's own `greedy_sampler`; the top-p / min-p / top-k filters are mlx-lm's own
`apply_*` functions, applied in the order `make_sampler` applies them. The one difference from
`make_sampler` is the random draw: it uses a PRNG key owned by the request (split once per
token) instead of MLX's global random state, so a seeded request gives the same tokens however
its steps are interleaved with other requests' (MLX 0.32 cannot save/restore the global state).
"""

from __future__ import annotations

import json
import logging
import math
import random
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
from mlx_lm.sample_utils import (
    LogitsProcessor,
    Sampler,
    apply_min_p,
    apply_top_k,
    apply_top_p,
    greedy_sampler,
    make_logits_processors,
)

from protocol.inputs import SamplingParams
from worker.runtime.errors import bad_request

log = logging.getLogger(__name__)

# Fields of generation_config.json that stand in for a request's None.
_DEFAULT_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
# What OpenAI's API does when neither the request nor the checkpoint says.
_OPENAI_DEFAULTS: dict[str, Any] = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0}


@dataclass(frozen=True, slots=True)
class ResolvedSampling:
    """Sampling with every None replaced by the checkpoint's or OpenAI's default, validated."""

    temperature: float
    top_p: float
    top_k: int
    min_p: float
    seed: int | None
    repetition_penalty: float | None
    presence_penalty: float | None
    frequency_penalty: float | None
    logit_bias: dict[int, float] | None


def load_sampling_defaults(model_dir: str | Path) -> dict[str, Any]:
    """The sampling fields of the checkpoint's generation_config.json ({} when absent)."""
    path = Path(model_dir) / "generation_config.json"
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable %s: %s", path, exc)
        return {}
    return {k: config[k] for k in _DEFAULT_FIELDS if config.get(k) is not None}


def resolve_sampling(
    params: SamplingParams, defaults: Mapping[str, Any], vocab_size: int
) -> ResolvedSampling:
    """Fills defaults and validates; raises RequestError (bad_request) naming the bad field."""

    def pick(name: str) -> Any:
        value = getattr(params, name)
        if value is None:
            value = defaults.get(name, _OPENAI_DEFAULTS.get(name))
        return value

    temperature = _number("temperature", pick("temperature"))
    top_p = _number("top_p", pick("top_p"))
    min_p = _number("min_p", pick("min_p"))
    top_k = pick("top_k")
    if temperature < 0:
        raise bad_request(f"temperature must be >= 0, got {temperature}")
    if not 0 <= top_p <= 1:
        raise bad_request(f"top_p must be in [0, 1], got {top_p}")
    if not 0 <= min_p <= 1:
        raise bad_request(f"min_p must be in [0, 1], got {min_p}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < -1:
        raise bad_request(f"top_k must be an integer >= -1 (-1 or 0: no limit), got {top_k!r}")
    repetition_penalty = pick("repetition_penalty")
    if repetition_penalty is not None:
        repetition_penalty = _number("repetition_penalty", repetition_penalty)
        if repetition_penalty <= 0:
            raise bad_request(f"repetition_penalty must be > 0, got {repetition_penalty}")
    presence = params.presence_penalty
    frequency = params.frequency_penalty
    seed = params.seed
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise bad_request(f"seed must be an integer, got {seed!r}")
    return ResolvedSampling(
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        min_p=min_p,
        seed=seed,
        repetition_penalty=repetition_penalty,
        presence_penalty=None if presence is None else _number("presence_penalty", presence),
        frequency_penalty=None if frequency is None else _number("frequency_penalty", frequency),
        logit_bias=_logit_bias(params.logit_bias, vocab_size),
    )


def make_request_sampler(sampling: ResolvedSampling, vocab_size: int) -> Sampler:
    """A sampler for one request: mlx-lm's filters, then a draw with the request's own key."""
    if sampling.temperature == 0:
        return greedy_sampler
    filters = []
    # Same conditions and order as mlx_lm.sample_utils.make_sampler.
    if 0 < sampling.top_p < 1.0:
        filters.append(lambda x: apply_top_p(x, sampling.top_p))
    if sampling.min_p != 0.0:
        filters.append(lambda x: apply_min_p(x, sampling.min_p, 1))
    # apply_top_k rejects k >= vocab; such a k keeps every token anyway.
    if 0 < sampling.top_k < vocab_size:
        filters.append(lambda x: apply_top_k(x, sampling.top_k))
    seed = sampling.seed if sampling.seed is not None else _draw_seed()
    return _KeyedCategoricalSampler(
        mx.random.key(seed % 2**64), 1.0 / sampling.temperature, filters
    )


def _secret_seed() -> int:
    return secrets.randbits(63)


# Draws an unseeded request's seed. The ranks of a distributed group draw from one shared
# sequence (`use_seed_source`): they admit the same requests in the same order, so each
# request gets the same key on every rank and every rank samples the same tokens.
_draw_seed: Callable[[], int] = _secret_seed


def use_seed_source(seed: int) -> None:
    """Unseeded requests' seeds from now on: the sequence of a generator seeded with `seed`."""
    global _draw_seed
    rng = random.Random(seed)
    _draw_seed = lambda: rng.getrandbits(63)  # noqa: E731


def make_request_logits_processors(sampling: ResolvedSampling) -> list[LogitsProcessor]:
    return make_logits_processors(
        logit_bias=sampling.logit_bias,
        repetition_penalty=sampling.repetition_penalty,
        presence_penalty=sampling.presence_penalty,
        frequency_penalty=sampling.frequency_penalty,
    )


class _KeyedCategoricalSampler:
    """Filters, then `categorical(logprobs / temp)` with a fresh subkey of this request's key."""

    def __init__(self, key: mx.array, inv_temp: float, filters: list) -> None:
        self._key = key
        self._inv_temp = inv_temp
        self._filters = filters

    def __call__(self, logprobs: mx.array) -> mx.array:
        self._key, token = self._draw(self._key, logprobs)
        return token

    def draws(self, rows: list[mx.array]) -> tuple[list[mx.array], list[mx.array]]:
        """What calling this sampler on each of `rows` in turn would draw (lazily), without
        moving its key; and the key after each draw, for `advance_to` (speculation draws the
        positions of a verification at once and keeps the draws it emits)."""
        key, tokens, keys = self._key, [], []
        for logprobs in rows:
            key, token = self._draw(key, logprobs)
            tokens.append(token)
            keys.append(key)
        return tokens, keys

    @property
    def key(self) -> mx.array:
        """The key the next draw splits (for `advance_to`)."""
        return self._key

    def advance_to(self, key: mx.array) -> None:
        self._key = key

    def _draw(self, key: mx.array, logprobs: mx.array) -> tuple[mx.array, mx.array]:
        for apply in self._filters:
            logprobs = apply(logprobs)
        key, subkey = mx.random.split(key)
        return key, mx.random.categorical(logprobs * self._inv_temp, key=subkey)


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise bad_request(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _logit_bias(bias: Mapping[Any, Any] | None, vocab_size: int) -> dict[int, float] | None:
    if not bias:
        return None
    result: dict[int, float] = {}
    for key, value in bias.items():
        try:
            token = int(key)
        except (TypeError, ValueError):
            raise bad_request(f"logit_bias key {key!r} is not a token id") from None
        if not 0 <= token < vocab_size:
            raise bad_request(
                f"logit_bias token id {token} is out of range (vocabulary size {vocab_size})"
            )
        result[token] = _number(f"logit_bias[{token}]", value)
    return result
