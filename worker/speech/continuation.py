"""A Qwen3-TTS phrase spoken as the continuation of the phrase before it.

Chat answers, the speech WebSocket and Realtime responses are spoken phrase by phrase (a
phrase per speech request, gateway/audio/speech/phrases.py), so that speech starts at the
first clause, not at the end of the answer. Spoken alone, every phrase would begin its prosody
afresh. Qwen3-TTS's talker speaks from a prompt that holds the whole text (over the codec's
pad token), then the codec's begin token, then one codec frame per step. So a phrase can go on
from the previous one: its prompt holds the previous phrase's text and its own, then the
previous phrase's frames (each frame's row as the generator would have fed it: the tts pad
embedding plus the sum of the frame's code embeddings), and the talker continues from the
state (the KV cache) it would be in had it spoken both phrases at once and just finished the
first; mlx-audio's repetition penalty, which looks back at this request's own frames, starts
empty. This is the structure of mlx-audio's own in-context cloning prompt
(`_prepare_icl_generation_inputs`: reference text and target text, then the reference's
frames), with the previous phrase in the place of the reference clip; tests/unit/test_speech_continuation.py checks that a phrase
continued from frames of a whole-text generation makes that generation's next frames.

The worker keeps nothing between requests: a continuable phrase's terminal delta hands back
`Delta.speech_context` (`pack`: its text and its frames), which the gateway passes, unread, as
the next phrase's `SpeechInputs.context` (`unpack` checks it). `continuing` puts the longer
prompt in place for one request's generator: a stand-in for `_prepare_generation_inputs`,
entered inside the voice cache's (worker/speech/voice_cache.py), whose prefix (the voice) it
leaves as it is. The plain prompt only: an in-context clone's prompt already holds its clip.
"""

from __future__ import annotations

import contextlib
import inspect
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import msgpack
import numpy as np

from worker.runtime.errors import bad_request
from worker.speech.stand_in import standing_in

VERSION = 1
MAX_CONTEXT_FRAMES = 4096  # 5.5 minutes of frames; a phrase is at most 160 characters
MAX_CONTEXT_CHARS = 4096  # a speech request's input limit


@dataclass(frozen=True)
class Context:
    """The phrase before: its text and its codec frames ([1, code groups, frames])."""

    text: str
    codes: mx.array


def pack(text: str, codes: mx.array) -> bytes:
    groups, frames = int(codes.shape[1]), int(codes.shape[2])
    data = np.asarray(codes[0], dtype=np.int16).astype("<i2").tobytes()
    return msgpack.packb({"v": VERSION, "text": text, "groups": groups, "frames": frames,
                          "codes": data})  # fmt: skip


def unpack(data: bytes, groups: int, codebook: int) -> Context:
    """A context as `pack` made it, for a model of `groups` code groups of `codebook` codes; a
    bad request naming `context` when it is not one."""
    try:
        fields = msgpack.unpackb(data)
        text, frames, codes = fields["text"], fields["frames"], fields["codes"]
        ok = (
            fields.get("v") == VERSION
            and fields["groups"] == groups
            and isinstance(text, str)
            and isinstance(frames, int)
            and isinstance(codes, bytes)
        )
    except Exception:
        ok = False
    if not ok:
        raise bad_request("context is not a speech context this model handed back")
    if not 0 < frames <= MAX_CONTEXT_FRAMES or len(text) > MAX_CONTEXT_CHARS:
        raise bad_request("context is longer than a speech request can be")
    if len(codes) != 2 * groups * frames:
        raise bad_request("context's frames do not match its size")
    array = np.frombuffer(codes, dtype="<i2").reshape(groups, frames)
    if array.min() < 0 or array.max() >= codebook:
        raise bad_request("context holds codes outside this model's codebook")
    return Context(text, mx.array(array.astype(np.int32))[None])


def joined(before: str, text: str) -> str:
    """Two phrases as one text: a space between them, as the phrases were cut at one, except
    after a wide (CJK) character, where the text had none."""
    wide = bool(before) and unicodedata.east_asian_width(before[-1]) in ("W", "F")
    return f"{before}{text}" if wide else f"{before} {text}"


def frame_rows(model: Any, codes: mx.array, pad: mx.array) -> mx.array:
    """The talker's input rows for frames already spoken: as mlx-audio's generator makes the
    next step's input (the first group's embedding, each later group's added in order, under
    the text track's pad)."""
    talker = model.talker
    embeds = talker.get_input_embeddings()(codes[:, 0, :])
    for group in range(codes.shape[1] - 1):
        embeds = embeds + talker.code_predictor.codec_embedding[group](codes[:, group + 1, :])
    return pad + embeds


@contextlib.contextmanager
def continuing(model: Any, context: Context) -> Iterator[None]:
    """While inside, the model's plain prompt is the continuation of `context`."""
    prepare = model._prepare_generation_inputs  # the voice cache's stand-in, when serving
    signature = inspect.signature(type(model)._prepare_generation_inputs.__get__(model))

    def continued(*args: Any, **kwargs: Any) -> tuple[mx.array, mx.array, mx.array]:
        bound = signature.bind(*args, **kwargs)
        bound.arguments["text"] = joined(context.text, bound.arguments["text"])
        embeds, trailing, pad = prepare(*bound.args, **bound.kwargs)
        rows = frame_rows(model, context.codes, pad).astype(embeds.dtype)
        return mx.concatenate([embeds, rows], axis=1), trailing, pad

    with standing_in(model, {"_prepare_generation_inputs": continued}):
        yield
