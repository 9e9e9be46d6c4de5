"""Qwen3-TTS's voice cache: what a voice costs a request, computed once and reused.

A Qwen3-TTS request's talker input is its voice's fixed prefix (a style instruction or a voice
description, the role tokens, the codec's control tokens and the speaker: a preset's embedding
or the x-vector of a reference clip; in-context cloning adds the clip's transcript), then the
text to speak (and, in context, the clip's codec frames). mlx-audio recomputes all of it for
every request: the x-vector (the ECAPA-TDNN speaker encoder over the clip), the clip's codec
codes (the codec's encoder; mlx-audio keeps those in `model._icl_cache` keyed by the clip's
length and sum, which two different clips can share) and the prefix's KV (in the prefill).

`VoiceCache.serving()` is entered around each step of a Qwen3-TTS request's generator (like
worker/speech/staged.py's `deferring`) and puts stand-ins on the model for its duration:
- `extract_speaker_embedding`: the x-vector, kept by the clip's content;
- `_prepare_icl_generation_inputs` runs with `_icl_cache` standing for this cache: the clip's
  codes and transcript ids, kept by the clip's content and the transcript;
- `talker`: the prefill is run in two calls, the voice's prefix (everything before the text,
  found by `_prepare_*_inputs`' stand-ins from the text's token count) and then the rest; the
  prefix's KV is kept by the content of the prefix's input embeddings, so a later request in
  the same voice starts from it and prefills only its own text (an in-context clone: its text
  and, after it, the clip's codec frames, which mlx-audio places after the text and which are
  therefore prefilled every time).
Every key is a content hash (sha256 of the arrays' bytes), so a changed reference clip or
description is another entry: stale audio cannot be served. Entries live in one LRU bounded in
bytes (`max_bytes`; 0 keeps nothing, and the work is done as with a cache that never hits).
Counted for /metrics as vLLM counts its prefix cache: the prefills' tokens (queried), those
whose KV was reused (hit), and entries evicted.

Why the audio is mlx-audio's own: the prefix's KV and the rest's logits computed in two calls
are, on the CPU, bit for bit those of one call (each row's matmuls, attention over the same
keys with the same additive mask); tests/unit/test_speech_voice_cache.py compares seeded audio
with direct mlx-audio, the cache cold and warm, for preset, described and cloned voices.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from worker.speech.stand_in import standing_in

DEFAULT_VOICE_CACHE_BYTES = 64 << 20
# The chat template mlx-audio wraps the text in; the text's own tokens are all but its first 3
# (the role) and last 5 (`<|im_end|>\n<|im_start|>assistant\n`).
_TEXT_TEMPLATE = "<|im_start|>assistant\n{}<|im_end|>\n<|im_start|>assistant\n"
_TEMPLATE_TOKENS = 8


def digest(array: Any) -> str:
    """sha256 over an array's dtype, shape and bytes."""
    if isinstance(array, mx.array) and array.dtype == mx.bfloat16:  # numpy has no bfloat16
        array = array.view(mx.uint16)
    value = np.ascontiguousarray(np.asarray(array))
    h = hashlib.sha256(f"{value.dtype}{value.shape}".encode())
    h.update(value.tobytes())
    return h.hexdigest()


def _nbytes(value: Any) -> int:
    if isinstance(value, mx.array):
        return int(value.nbytes)
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return 0


class VoiceCache:
    """One Qwen3-TTS model's voice entries (see the module docstring)."""

    def __init__(self, model: Any, max_bytes: int = DEFAULT_VOICE_CACHE_BYTES) -> None:
        self._model = model
        self.max_bytes = max_bytes
        self.bytes = 0
        self.stats: Any = None  # the worker's WorkerStats, once bound (count_voice_cache)
        self._entries: OrderedDict[tuple[str, ...], tuple[Any, int]] = OrderedDict()
        cls = type(model)
        self._plain = _bind(cls._prepare_generation_inputs, model)
        self._in_context = _bind(cls._prepare_icl_generation_inputs, model)
        self._xvector = _bind(cls.extract_speaker_embedding, model)
        self._plain_signature = inspect.signature(self._plain)
        self._in_context_signature = inspect.signature(self._in_context)

    def __len__(self) -> int:
        return len(self._entries)

    # -- the LRU -------------------------------------------------------------------------

    def get(self, key: tuple[str, ...]) -> Any:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: tuple[str, ...], value: Any) -> None:
        size = _nbytes(value)
        if size > self.max_bytes:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        self._entries[key] = (value, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= dropped
            self._count(evicted=1)

    def _count(self, queried: int = 0, hit: int = 0, evicted: int = 0) -> None:
        if self.stats is not None:
            self.stats.count_voice_cache(queried, hit, evicted)

    # -- the stand-ins -------------------------------------------------------------------

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """While inside, the model's voice work goes through this cache."""
        model = self._model
        talker = _Talker(model.talker, self)
        stand_ins: dict[str, Any] = {
            "talker": talker,
            "_prepare_generation_inputs": self._plain_inputs(talker),
            "_prepare_icl_generation_inputs": self._icl_inputs(talker),
            "extract_speaker_embedding": self._speaker_embedding,
        }
        with standing_in(model, stand_ins):
            yield

    def _speaker_embedding(self, audio: mx.array, sr: int = 24000) -> mx.array:
        key = ("x-vector", digest(audio), str(sr))
        cached = self.get(key)
        if cached is None:
            cached = self._xvector(audio, sr)
            self.put(key, cached)
        return cached

    def _plain_inputs(self, talker: _Talker) -> Any:
        def prepare(*args: Any, **kwargs: Any) -> Any:
            out = self._plain(*args, **kwargs)
            text = self._plain_signature.bind(*args, **kwargs).arguments["text"]
            # The text's tokens, its end, then the codec's pad + bos: the rest is the voice.
            talker.prefix = out[0].shape[1] - (self._text_tokens(text) + 2)
            return out

        return prepare

    def _icl_inputs(self, talker: _Talker) -> Any:
        def prepare(*args: Any, **kwargs: Any) -> Any:
            arguments = self._in_context_signature.bind(*args, **kwargs).arguments
            key = ("clip", digest(arguments["ref_audio"]), arguments["ref_text"])
            with standing_in(self._model, {"_icl_cache": _ClipCodes(self, key)}):
                out = self._in_context(*args, **kwargs)
            # The target text's tokens and its end, then codec bos + the clip's frames.
            rest = self._text_tokens(arguments["text"]) + 1 + out[3].shape[2] + 1
            talker.prefix = out[0].shape[1] - rest
            return out

        return prepare

    def _text_tokens(self, text: str) -> int:
        ids = self._model.tokenizer.encode(_TEXT_TEMPLATE.format(text))
        return len(ids) - _TEMPLATE_TOKENS

    def prefill(self, talker: Any, embeds: mx.array, prefix: int, cache: list[Any]) -> Any:
        """The talker's prefill of `embeds` into the empty `cache`, its first `prefix` rows'
        KV from this cache when their content was seen, else computed (and kept)."""
        head = embeds[:, :prefix]
        key = ("prefix", digest(head))
        kept = self.get(key)
        self._count(queried=embeds.shape[1], hit=0 if kept is None else prefix)
        if kept is None:
            talker(head, cache=cache)
            views = [(c.keys[..., :prefix, :], c.values[..., :prefix, :]) for c in cache]
            if _nbytes(views) <= self.max_bytes:
                # Copies of the prefix's rows (a view would hold the whole buffer).
                kept = [(mx.contiguous(k), mx.contiguous(v)) for k, v in views]
                mx.eval(kept)
                self.put(key, kept)
        else:
            for layer, (keys, values) in zip(cache, kept, strict=True):
                # A new array at the next write (the buffer is exactly `prefix` long), so the
                # kept arrays are never written into.
                layer.keys, layer.values, layer.offset = keys, values, prefix
        n = embeds.shape[1] - prefix
        causal = nn.MultiHeadAttention.create_additive_causal_mask(n)
        mask = mx.concatenate([mx.zeros((n, prefix), causal.dtype), causal], axis=1)
        return talker(embeds[:, prefix:], cache=cache, mask=mask.astype(embeds.dtype))


class _Talker:
    """Stands in for `model.talker`: the request's first prefill goes through the cache."""

    def __init__(self, real: Any, voice_cache: VoiceCache) -> None:
        self._real = real
        self._voice_cache = voice_cache
        self.prefix: int | None = None  # set by the inputs' stand-ins, used once

    def __call__(self, inputs_embeds: mx.array, cache: Any = None, **kwargs: Any) -> Any:
        prefix, self.prefix = self.prefix, None
        usable = (
            prefix is not None
            and not kwargs
            and cache is not None
            and cache[0].offset == 0
            and 0 < prefix < inputs_embeds.shape[1]
        )
        if not usable:
            return self._real(inputs_embeds, cache=cache, **kwargs)
        assert prefix is not None
        return self._voice_cache.prefill(self._real, inputs_embeds, prefix, cache)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _ClipCodes:
    """Stands in for `model._icl_cache` during one `_prepare_icl_generation_inputs` call:
    mlx-audio's key (transcript, (length, sum)) is replaced by the clip's content digest."""

    def __init__(self, voice_cache: VoiceCache, key: tuple[str, ...]) -> None:
        self._voice_cache = voice_cache
        self._key = key

    def __contains__(self, _key: object) -> bool:
        return self._voice_cache.get(self._key) is not None

    def __getitem__(self, _key: object) -> Any:
        value = self._voice_cache.get(self._key)
        if value is None:
            raise KeyError(self._key)
        return value

    def __setitem__(self, _key: object, value: Any) -> None:
        self._voice_cache.put(self._key, value)


def _bind(function: Any, owner: Any) -> Any:
    return function.__get__(owner, type(owner))


def voice_cache_for(model: Any, family_name: str, max_bytes: int) -> VoiceCache | None:
    """The voice cache of a Qwen3-TTS model with the methods it stands in for; else None."""
    needed = (
        "_prepare_generation_inputs",
        "_prepare_icl_generation_inputs",
        "extract_speaker_embedding",
    )
    if family_name != "qwen3_tts" or not all(hasattr(type(model), n) for n in needed):
        return None
    return VoiceCache(model, max_bytes)
