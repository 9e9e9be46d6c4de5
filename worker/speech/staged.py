"""Qwen3-TTS's codec decoding in short units, so one speech step never holds the MLX thread long.

The worker's one MLX thread alternates the engines' steps (worker/runtime/scheduler.py), so a
chat request that arrives during a speech request waits, for each of its tokens, for one speech
step. A yield of mlx-audio's streaming Qwen3-TTS generator does two things: the talker and code
predictor make `streaming_interval * 12.5` codec frames (a few ms each), then the codec's
decoder turns them into audio with `speech_tokenizer.decoder.streaming_step(codes)`; the
decoder is a large part on the CPU (its dilated and transposed convolutions, even in their
faster forms, worker/speech/qwen3_codec_fast.py: docs/benchmarks.md).

The generator cannot be paused inside, and a smaller `streaming_interval` would change the
chunks the codec sees, so this splits the decoder's work without changing it:
- while a request's generator runs, `deferring()` puts a `_Recorder` in place of
  `speech_tokenizer.decoder`: `streaming_step(codes)` and `reset_streaming_state()` are
  recorded instead of done, and `streaming_step` returns silence of the right length (the
  generator only evaluates it, measures it and yields it); the yield now costs only its frames;
- `decode(ops)` then replays the recorded calls on the real decoder, in order, as a generator:
  `streaming_step` as mlx-audio writes it, the same operations on the same modules and
  streaming state, evaluated stage by stage (the first layers together, then each upsampling
  block's upsample and each of its residual units, then the output layers) with a yield after
  each. The engine advances it one stage per step and sends the audio when it is done. It
  records the yields of a chunk of the growing schedule first (`Chunks`, CHUNK_FRAMES) and
  replays their calls `coalesced`: the chunk's frames in one `streaming_step`, as the
  generator would call it with a longer `streaming_interval`.
Evaluating intermediate arrays of MLX's lazy graph earlier runs the same kernels on the same
inputs (streaming_step is not under `mx.compile`: the compiled wrapper mlx-audio installs only
compiles `__call__`), so the audio is sample for sample what the generator would have decoded:
tests/unit/test_speech_engine.py compares it with direct mlx-audio.

The replay mirrors `Qwen3TTSSpeechTokenizerDecoder.streaming_step` and `DecoderBlock.step`
(mlx-audio, MIT licence: the same operations in the same order, cut into stages), so
`staging_for` uses it only when those two methods are the ones it was written against (their
source, fingerprinted); another mlx-audio version falls back to whole yields (correct, just
longer steps) with a warning. The generator itself passes the decoder's output on untouched
(mlx-audio 0.6.2); the engine checks each yield (`yielded_as_decoded`: the recorder's silence,
unchanged) and fails the request rather than send other audio if a version reworks it.
Families that yield one text segment at a time (Soprano, Kokoro, VoxCPM2, MOSS-TTS-Nano) do a
whole segment inside one `next()`: no stream of frames or codec chunks to split there, so their
steps stay one segment long.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import logging
from collections.abc import Generator, Iterator
from typing import Any

import mlx.core as mx

from worker.speech.stand_in import standing_in

log = logging.getLogger(__name__)

RESET = "reset"  # a recorded reset_streaming_state(); any other op is a chunk of codes
# Codec frames per replayed chunk, the n-th chunk of a codec stream taking the n-th entry (the
# last repeats): the first audio waits for one frame; later chunks grow, so the codec's per-call
# work is spread over more audio (a chunk of 8 is 0.64 s), while each chunk still comes well
# before the audio already sent has played at a real-time factor under 0.5. Streamed or not, a
# request is decoded in this schedule, so both give the same samples.
CHUNK_FRAMES = (1, 2, 4, 8)

# sha256 of the whitespace-stripped source of the methods `decode` mirrors, in mlx-audio 0.6.2.
KNOWN_SOURCES = {
    "Qwen3TTSSpeechTokenizerDecoder.streaming_step": (
        "0f6641e99939eeeec8ec7f791175bab232e905f395529cdb54297a8c7836c795"
    ),
    "DecoderBlock.step": "1ef33e72340d508f91cd524a77cac4ad572476a600d000992e39d07f5348a14e",
}


def fingerprint(method: Any) -> str:
    source = "".join(inspect.getsource(method).split())
    return hashlib.sha256(source.encode()).hexdigest()


class _Recorder:
    """Stands in for the decoder while a generator runs: records its streaming calls."""

    def __init__(self, real: Any, total_upsample: int) -> None:
        self._real = real
        self._total_upsample = total_upsample
        self.ops: list[Any] = []

    def reset_streaming_state(self) -> None:
        self.ops.append(RESET)

    def streaming_step(self, codes: mx.array) -> mx.array:
        self.ops.append(codes)
        # [batch, 1, samples], as the decoder answers: every codec frame is total_upsample
        # samples (its convolutions are causal and length-preserving, its upsampling exact).
        return mx.zeros((codes.shape[0], 1, codes.shape[2] * self._total_upsample))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._real(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class CodecStaging:
    """Defers one model's codec decoding out of its generator and replays it in stages."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._wrapper = tokenizer.decoder  # what mlx-audio installed (mx.compile's wrapper)
        self._decoder = unwrap_decoder(self._wrapper)
        self._total_upsample = int(self._decoder.total_upsample)

    @contextlib.contextmanager
    def deferring(self) -> Iterator[list[Any]]:
        """While inside, the model's streaming decoder calls are recorded into the list."""
        recorder = _Recorder(self._wrapper, self._total_upsample)
        with standing_in(self._tokenizer, {"decoder": recorder}):
            yield recorder.ops

    def decode(self, ops: list[Any]) -> Generator[None, None, mx.array | None]:
        """Replays recorded calls in order, a yield after each stage; returns the audio of the
        recorded chunks (1-D, as the generator's `wav.squeeze(1)[0]`), None when there were
        none. Run it inside the request's state (worker/speech/state.py), like the generator."""
        chunks = []
        for op in ops:
            if isinstance(op, str):
                self._decoder.reset_streaming_state()
            else:
                wav = yield from self._streaming_step(op)
                chunks.append(wav.squeeze(1)[0])
        if not chunks:
            return None
        audio = chunks[0] if len(chunks) == 1 else mx.concatenate(chunks)
        mx.eval(audio)
        return audio

    @staticmethod
    def yielded_as_decoded(yielded: list[mx.array], decoded: mx.array) -> bool:
        """Whether the yields' audio is the recorder's silence passed on as it was: all zeros,
        together as many samples as the chunk decoded for them (mlx-audio yields
        `wav.squeeze(1)[0]`). Anything else means the generator reworked the decoder's output
        (trimmed, faded, mixed it), which replaying the decoder alone would not reproduce."""
        if any(y.ndim != 1 for y in yielded):
            return False
        joined = yielded[0] if len(yielded) == 1 else mx.concatenate(yielded)
        return joined.shape == decoded.shape and not bool(mx.any(joined).item())

    def _streaming_step(self, codes: mx.array) -> Generator[None, None, mx.array]:
        # Qwen3TTSSpeechTokenizerDecoder.streaming_step, evaluated stage by stage.
        d = self._decoder
        if d._transformer_cache is None:
            d._transformer_cache = d.pre_transformer.make_cache()
        hidden = d.quantizer.decode(codes)
        hidden = mx.transpose(hidden, (0, 2, 1))
        hidden = d.pre_conv.step(hidden)
        hidden = d.pre_transformer(hidden, cache=d._transformer_cache)
        for upsample_layers in d.upsample:
            hidden = upsample_layers[0](hidden)
            hidden = upsample_layers[1].step(hidden)
        wav = d.decoder[0].step(hidden)
        mx.eval(wav)
        yield
        for block in d.decoder[1:-2]:
            # DecoderBlock.step: snake, upsample (overlap-add), residual units
            wav = block.block[0](wav)
            wav = block.block[1].step(wav)
            mx.eval(wav)
            yield
            for unit in block.block[2:]:
                wav = unit.step(wav)
                mx.eval(wav)
                yield
        wav = d.decoder[-2](wav)
        wav = d.decoder[-1].step(wav)
        wav = mx.transpose(wav, (0, 2, 1))
        return mx.clip(wav, -1.0, 1.0)


class Chunks:
    """A staged request's codec calls recorded and not yet replayed, the yields whose audio
    they are, and its place in the growing schedule (CHUNK_FRAMES: the n-th chunk of a codec
    stream takes the n-th entry, the last repeating). A chunk is due when its frames are in,
    when the codec stream closes (a reset after frames: the request's or one text segment's
    end, whose frames go then; the next stream starts the schedule again), or at the end."""

    def __init__(self) -> None:
        self._ops: list[Any] = []
        self._held: list[Any] = []
        self._decoded = 0  # chunks of the current codec stream

    def record(self, ops: list[Any], result: Any) -> bool:
        """One yield's recorded calls and the yield (None: the generator ended); whether a
        chunk is due."""
        self._ops += ops
        if result is None:
            return True
        self._held.append(result)
        wanted = CHUNK_FRAMES[min(self._decoded, len(CHUNK_FRAMES) - 1)]
        frames = sum(int(op.shape[2]) for op in self._ops if not isinstance(op, str))
        return self._closes() or frames >= wanted

    def take(self) -> tuple[list[Any], list[Any]]:
        """The recorded calls to replay (`coalesced`) and the yields they are the audio of."""
        ops, held = self._ops, self._held
        if self._closes():  # after the last reset: nothing, or the next stream's first chunk
            last = max(i for i, op in enumerate(ops) if isinstance(op, str))
            self._decoded = int(any(not isinstance(op, str) for op in ops[last + 1 :]))
        else:
            self._decoded += 1
        self._ops, self._held = [], []
        return coalesced(ops), held

    def _closes(self) -> bool:
        """Whether the recorded calls reset the codec after frames."""
        codes = [i for i, op in enumerate(self._ops) if not isinstance(op, str)]
        return bool(codes) and any(isinstance(op, str) for op in self._ops[codes[0] :])


def coalesced(ops: list[Any]) -> list[Any]:
    """Recorded calls with each run of consecutive chunks of codes joined into one chunk: the
    decoder then decodes them in one `streaming_step`, as mlx-audio's generator would with a
    longer `streaming_interval` (the same frames, in another float rounding than frame by
    frame: up to ~3e-6, which can move an int16 sample by one)."""
    out: list[Any] = []
    run: list[mx.array] = []
    for op in [*ops, RESET]:
        if isinstance(op, str):
            if run:
                out.append(run[0] if len(run) == 1 else mx.concatenate(run, axis=2))
                run = []
            out.append(op)
        else:
            run.append(op)
    return out[:-1]


def staging_for(model: Any, family_name: str) -> CodecStaging | None:
    """The staging of a Qwen3-TTS model whose decoder `decode` mirrors; None otherwise."""
    if family_name != "qwen3_tts":
        return None
    tokenizer = getattr(model, "speech_tokenizer", None)
    decoder = unwrap_decoder(getattr(tokenizer, "decoder", None))
    if decoder is None or not hasattr(decoder, "streaming_step"):
        return None
    block = next(iter(getattr(decoder, "decoder", [None])[1:-2]), None)
    methods = {
        "Qwen3TTSSpeechTokenizerDecoder.streaming_step": type(decoder).streaming_step,
        "DecoderBlock.step": getattr(type(block), "step", None),
    }
    try:
        changed = [
            name for name, method in methods.items() if fingerprint(method) != KNOWN_SOURCES[name]
        ]
    except (OSError, TypeError):  # no source to read
        changed = list(methods)
    if changed:
        log.warning(
            "mlx-audio's Qwen3-TTS decoder differs from the one the speech engine splits "
            "(%s changed): each speech step decodes a whole streamed chunk",
            ", ".join(changed),
        )
        return None
    return CodecStaging(tokenizer)


def unwrap_decoder(decoder: Any) -> Any:
    """The decoder module itself: mx.compile's wrapper (which mlx-audio installs) forwards
    attribute reads to the module, and its bound methods know it."""
    method = getattr(decoder, "streaming_step", None)
    return getattr(method, "__self__", decoder)
