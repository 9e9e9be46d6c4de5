"""Speech out on mlx-audio: text -> PCM deltas, implementing `worker.runtime.engine.Engine`.

Each admitted request owns the generator `model.generate(**kwargs)` of its mlx-audio model
(kwargs from its family, worker/speech/families.py; Kokoro's is the server's own front end over
mlx-audio's model, worker/speech/kokoro_speaker.py). `step()` does one bounded unit of work for
every active request, round robin, and sends what it produced at once as `Delta(audio=<int16
LE>, sample_rate=...)`. A unit is one yield of the generator, except where that would hold the
worker's one MLX thread (and the chat requests next to it) long:
- Qwen3-TTS (yields every `streaming_interval` seconds of audio, 1 codec frame by default):
  the yield makes only the frame; the codec calls of a chunk of frames (CHUNK_FRAMES: 1, 2, 4,
  then 8) are recorded and then replayed as one call over the following steps, one decoder
  stage per step (worker/speech/staged.py), the same computation as mlx-audio's decoder on
  those frames, split where its lazy graph can be evaluated in parts;
- the other families yield one whole text segment per `next()`, which cannot be split from
  outside: their unit stays one segment.
A Qwen3-TTS request's voice (its prefix's KV, a reference clip's x-vector and codes) comes from
the voice cache when it was heard before (worker/speech/voice_cache.py, entered around each
generator step). Audio longer than `MAX_DELTA_SECONDS` is sent over several steps. Aborts (and
the scheduler's deadlines) take effect between units. Random state and per-module streaming
buffers are swapped per request (worker/speech/state.py), so a request seeded with S produces,
sample for sample, what `mx.random.seed(S); model.generate(**kwargs)` produces directly on the
model as the family prepares it (on the CPU: Kokoro's decoder and Qwen3-TTS's codec in faster
forms), whatever else runs.

A Qwen3-TTS phrase can go on from the phrase before (its `SpeechInputs.context`), and hands
its own context back on its terminal delta (`speech_context`): worker/speech/continuation.py.
Its code predictor runs compiled (worker/speech/qwen3_compiled.py, bit-equal on the CPU).

Usage on the terminal delta: prompt_tokens = characters of the input text; completion_tokens =
the tokens the model generated (GenerationResult.token_count summed: codec frames for Qwen3-TTS,
language-model tokens for Soprano).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import sys
from collections import deque
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx

from protocol.inputs import Op, SpeechInputs
from protocol.messages import Delta, ErrorInfo, FinishReason, Submit, Usage
from protocol.ready import Capability, SpeechInfo, Voice
from worker.runtime.errors import RequestError, bad_request, internal
from worker.runtime.request_log import named
from worker.speech.audio import decode_reference, mono, to_pcm16
from worker.speech.continuation import MAX_CONTEXT_FRAMES, Context, continuing, pack, unpack
from worker.speech.families import Family, SpeechRequest, check_voice, family_for
from worker.speech.staged import Chunks, CodecStaging, staging_for
from worker.speech.state import ModuleState, RequestState
from worker.speech.voice_cache import DEFAULT_VOICE_CACHE_BYTES, VoiceCache, voice_cache_for

log = logging.getLogger(__name__)

MAX_INPUT_CHARS = 4096  # OpenAI's limit for /v1/audio/speech
# Seconds of audio per yield of mlx-audio's Qwen3-TTS generator: one codec frame (12.5 a
# second), so the engine sees every frame as it is made and groups them itself
# (worker/speech/staged.py CHUNK_FRAMES).
DEFAULT_STREAMING_INTERVAL = 0.08
MAX_DELTA_SECONDS = 1.0
SPEED_RANGE = (0.25, 4.0)


@dataclass
class _Speech:
    submit: Submit
    generation: Iterator[Any]
    state: RequestState
    prompt_chars: int
    frames: int = 0
    # A phrase that goes on from the one before (its context, until its prompt is made), and
    # whether this one's terminal delta hands its own on: its text and the codes it made.
    context: Context | None = None
    continuable: bool = False
    text: str = ""
    codes: list[Any] = field(default_factory=list)
    pending: deque[tuple[bytes, int]] = field(default_factory=deque)  # (pcm, sample_rate)
    # Staged requests: the calls and yields of the chunk being gathered; the generator's end.
    chunks: Chunks = field(default_factory=Chunks)
    finished: bool = False
    # The staged codec decoding of the chunk being decoded, and the yields it is the audio of.
    decoding: Generator[None, None, Any] | None = None
    results: list[Any] = field(default_factory=list)

    def usage(self) -> Usage:
        return Usage(prompt_tokens=self.prompt_chars, completion_tokens=self.frames)


class TtsEngine:
    """Serves Op.SPEECH for one loaded mlx-audio TTS model (see the module docstring)."""

    ops = frozenset({Op.SPEECH})

    def __init__(
        self,
        model: Any,
        family: Family,
        path: Path,
        served_name: str,
        streaming_interval: float = DEFAULT_STREAMING_INTERVAL,
        max_tokens: int | None = None,
        voice_cache_bytes: int = DEFAULT_VOICE_CACHE_BYTES,
    ) -> None:
        self.model = model
        self.family = family
        self.served_name = served_name
        self.path = str(path)
        self.sample_rate = int(model.sample_rate)
        self.voices = family.voices(model, path)
        self.languages = [lang.lower() for lang in family.languages(model)]
        self._options = {"streaming_interval": streaming_interval, "max_tokens": max_tokens}
        self._modules = ModuleState(model)
        self._staging: CodecStaging | None = staging_for(model, family.name)
        self.voice_cache: VoiceCache | None = voice_cache_for(model, family.name, voice_cache_bytes)
        self._active: dict[str, _Speech] = {}
        self._max_delta_samples = max(1, int(self.sample_rate * MAX_DELTA_SECONDS))
        self.stats: Any = None  # the worker's WorkerStats, once bound: seconds of speech sent

    # -- Engine interface ----------------------------------------------------------------

    def bind_stats(self, stats: Any) -> None:
        self.stats = stats
        if self.voice_cache is not None:
            self.voice_cache.stats = stats

    def capabilities(self) -> list[Capability]:
        return [Capability.SPEECH]

    def ready_info(self) -> SpeechInfo:
        """What Ready.speech carries: the gateway's /v1/audio/voices and request checks."""
        return SpeechInfo(
            model=self.served_name,
            model_path=self.path,
            family=self.family.name,
            voices=[Voice(v["name"], v.get("language")) for v in self.voices],
            cloning=self.family.cloning(self.model),
            ref_text=self.family.takes_ref_text(self.model),
            descriptions=self.family.descriptions(self.model),
            instructions=self.family.instructions(self.model),
            languages=list(self.languages),
            speed=self.family.speed,
            streaming=self.family.streams,
            sample_rate=self.sample_rate,
        )

    def generate_kwargs(self, request: SpeechRequest) -> dict[str, Any]:
        """The `model.generate(**kwargs)` call a (validated) request becomes: the direct
        mlx-audio call that tests and benchmarks compare the engine with."""
        return self.family.kwargs(self.model, request, self._options)

    def active_ids(self) -> list[str]:
        return list(self._active)

    def admit(self, submit: Submit) -> Delta:
        rid = submit.request_id
        inputs = submit.inputs
        assert isinstance(inputs, SpeechInputs)  # the scheduler routes by op
        chars = len(inputs.input)
        try:
            request = self._validate(inputs)
            context = self._context(inputs, request)
            generation = iter(self.family.generate(self.model, self.generate_kwargs(request)))
        except RequestError as exc:
            return _terminal(rid, FinishReason.ERROR, Usage(chars, 0), exc.info())
        except Exception as exc:
            log.exception("speech request %s could not start", rid, extra=named(rid))
            info = internal(exc)
            return _terminal(rid, FinishReason.ERROR, Usage(chars, 0), info)
        state = RequestState(self._modules, request.seed)
        continuable = self._continues(request)
        self._active[rid] = _Speech(
            submit, generation, state, chars, context=context, continuable=continuable,
            text=request.text,
        )  # fmt: skip
        return Delta(rid)

    def step(self) -> list[Delta]:
        deltas = []
        for rid, speech in list(self._active.items()):
            delta = self._advance(rid, speech)
            if delta is not None:
                deltas.append(delta)
        return deltas

    def abort(self, request_ids: Iterable[str]) -> list[Delta]:
        deltas = []
        for rid in request_ids:
            speech = self._active.pop(rid, None)
            if speech is not None:
                self._close(speech)
                deltas.append(_terminal(rid, FinishReason.ABORT, speech.usage()))
        return deltas

    # -- one request ---------------------------------------------------------------------

    def _advance(self, rid: str, speech: _Speech) -> Delta | None:
        if not speech.pending:
            if speech.finished and speech.decoding is None:
                return self._end(rid, FinishReason.STOP)
            try:
                with speech.state:
                    ended = self._decode(speech) if speech.decoding else self._pull(speech)
            except RequestError as exc:
                return self._end(rid, FinishReason.ERROR, exc.info())
            except Exception as exc:
                log.exception("speech request %s failed", rid, extra=named(rid))
                info = internal(exc)
                return self._end(rid, FinishReason.ERROR, info)
            if ended:
                return self._end(rid, FinishReason.STOP)
            if not speech.pending:
                return None  # decoding goes on, or an empty chunk (a stream's end marker)
        pcm, rate = speech.pending.popleft()
        if self.stats is not None and rate:
            self.stats.count_speech(len(pcm) / (2 * rate))  # int16 mono: 2 bytes a sample
        return Delta(rid, audio=pcm, sample_rate=rate)

    def _pull(self, speech: _Speech) -> bool:
        """One yield of the generator (True at its end). Staged, its codec calls are recorded;
        once they make the next chunk of the schedule (or the codec stream or the generator
        has ended), their decoding is left in `speech.decoding` for the following steps."""
        voice_cache = (
            contextlib.nullcontext() if self.voice_cache is None else self.voice_cache.serving()
        )
        if self._staging is None:
            try:
                with voice_cache:
                    result = next(speech.generation)
            except StopIteration:
                return True
            self._count(speech, result)
            self._take(speech, [result])
            return False
        continued = (
            contextlib.nullcontext()
            if speech.context is None
            else continuing(self.model, speech.context)
        )
        with voice_cache, continued, self._staging.deferring() as ops:
            try:
                result = next(speech.generation)
            except StopIteration:
                result = None
        speech.context = None  # the first yield made the prompt
        if speech.continuable:
            speech.codes += [op for op in ops if not isinstance(op, str)]
        if result is None:
            speech.finished = True
        else:
            self._count(speech, result)
        if not speech.chunks.record(ops, result):
            return False
        replayed, held = speech.chunks.take()
        decoding = self._staging.decode(replayed)
        if not held:
            _drain(decoding)  # what the generator did at its end (a reset of the codec state)
            return speech.finished
        speech.decoding, speech.results = decoding, held
        return False

    def _decode(self, speech: _Speech) -> bool:
        """One stage of the staged decoding; at its end the chunk's audio is queued."""
        try:
            next(speech.decoding)
            return False
        except StopIteration as done:
            audio = done.value
        results, speech.decoding, speech.results = speech.results, None, []
        # The audio the generator would have decoded itself; None: the yields decoded
        # nothing, their audio is their own.
        if audio is not None and not CodecStaging.yielded_as_decoded(
            [r.audio for r in results], audio
        ):
            raise RuntimeError(
                "mlx-audio's Qwen3-TTS generator changed the decoder's audio before yielding "
                "it: the speech engine's staged decoding (worker/speech/staged.py) cannot "
                "reproduce it"
            )
        self._take(speech, results, audio)
        return False

    @staticmethod
    def _count(speech: _Speech, result: Any) -> None:
        """A yield's tokens, counted when it is made (an abort reports what was generated)."""
        speech.frames += int(getattr(result, "token_count", 0) or 0)

    def _take(self, speech: _Speech, results: list[Any], audio: Any = None) -> None:
        """Queues the audio of one or more yields: theirs, or `audio` decoded for them."""
        if audio is None:
            for result in results:
                self._queue(speech, result.audio, result)
        else:
            self._queue(speech, audio, results[0])

    def _queue(self, speech: _Speech, audio: Any, result: Any) -> None:
        pcm = to_pcm16(mono(audio))
        rate = int(getattr(result, "sample_rate", 0) or self.sample_rate)
        step = 2 * self._max_delta_samples
        for start in range(0, len(pcm), step):
            speech.pending.append((pcm[start : start + step], rate))

    def _end(self, rid: str, reason: FinishReason, error: ErrorInfo | None = None) -> Delta:
        speech = self._active.pop(rid)
        self._close(speech)
        delta = _terminal(rid, reason, speech.usage(), error)
        if reason == FinishReason.STOP and speech.continuable and speech.codes:
            codes = mx.concatenate(speech.codes, axis=2)
            if codes.shape[2] <= MAX_CONTEXT_FRAMES:  # a longer one no request could take
                delta.speech_context = pack(speech.text, codes)
        return delta

    def _close(self, speech: _Speech) -> None:
        close = getattr(speech.generation, "close", None)
        if close is not None:
            deferring = self._staging.deferring() if self._staging else contextlib.nullcontext()
            with speech.state, deferring, contextlib.suppress(Exception):
                close()

    # -- validation ----------------------------------------------------------------------

    def _validate(self, inputs: SpeechInputs) -> SpeechRequest:
        text = inputs.input
        if not text.strip():
            raise bad_request("input must be a non-empty string")
        if len(text) > MAX_INPUT_CHARS:
            raise bad_request(f"input is {len(text)} characters; the limit is {MAX_INPUT_CHARS}")
        if inputs.sample_format != "int16":
            raise bad_request("sample_format must be int16")
        request = SpeechRequest(
            text=text,
            voice=inputs.voice or None,
            ref_text=inputs.ref_text,
            instructions=inputs.instructions or None,
            language=self._check_language(inputs.language),
            speed=self._check_speed(inputs.speed),
            seed=inputs.seed,
        )
        request = dataclasses.replace(request, ref_audio=self._reference(inputs, request))
        request = dataclasses.replace(request, voice=check_voice(self.family, self.voices, request))
        self._check_instructions(request)
        return request

    def _continues(self, request: SpeechRequest) -> bool:
        """Whether a request's phrase can be continued by the next (worker/speech/
        continuation.py): a staged Qwen3-TTS request with the plain prompt (an in-context
        clone's prompt holds its clip instead), of one line (mlx-audio speaks a Base model's
        lines as separate segments, each its own prompt)."""
        in_context = request.ref_audio is not None and request.ref_text is not None
        one_line = "\n" not in request.text.strip()
        staged_qwen3 = self._staging is not None and self.family.name == "qwen3_tts"
        return staged_qwen3 and one_line and not in_context

    def _context(self, inputs: SpeechInputs, request: SpeechRequest) -> Context | None:
        if inputs.context is None:
            return None
        if not self._continues(request):
            raise bad_request(
                f"context: model {self.served_name} ({self.family.label}) cannot continue "
                "this request from a previous phrase"
            )
        predictor = self.model.talker.code_predictor
        groups = int(self.model.config.talker_config.num_code_groups)
        return unpack(inputs.context, groups, int(predictor.config.vocab_size))

    def _reference(self, inputs: SpeechInputs, request: SpeechRequest) -> Any:
        data = inputs.ref_audio
        if data is None:
            if request.ref_text is not None:
                raise bad_request("ref_text describes ref_audio: send the reference audio too")
            return None
        if not self.family.cloning(self.model):
            raise bad_request(
                f"model {self.served_name} ({self.family.label}) cannot clone a voice "
                "from ref_audio"
            )
        if request.ref_text is not None:
            if not request.ref_text.strip():
                raise bad_request("ref_text is empty: send the reference audio's transcript")
            if not self.family.takes_ref_text(self.model):
                raise bad_request(
                    f"model {self.served_name} clones from the audio alone: it takes no ref_text"
                )
        return decode_reference(data, self.sample_rate)

    def _check_language(self, language: Any) -> str | None:
        if language is None or (isinstance(language, str) and language.lower() == "auto"):
            return None
        if not isinstance(language, str):
            raise bad_request("language must be a string")
        if language.lower() not in self.languages:
            listed = ", ".join(self.languages) or "none (the model picks it from the text)"
            raise bad_request(f"unknown language {language!r}; this model's languages: {listed}")
        return language.lower()

    def _check_speed(self, speed: Any) -> float | None:
        if speed is None:
            return None
        if isinstance(speed, bool) or not isinstance(speed, (int, float)):
            raise bad_request("speed must be a number")
        if not SPEED_RANGE[0] <= speed <= SPEED_RANGE[1]:
            raise bad_request(f"speed must be between {SPEED_RANGE[0]} and {SPEED_RANGE[1]}")
        if speed != 1.0 and not self.family.speed:
            raise bad_request(f"this model ({self.family.label}) cannot change its speed")
        return float(speed)

    def _check_instructions(self, request: SpeechRequest) -> None:
        if self.family.descriptions(self.model) and not self.family.cloning(self.model):
            if not request.instructions and request.ref_audio is None:
                raise bad_request("this model designs its voice from instructions: describe it")
        if request.instructions and not self.family.instructions(self.model):
            raise bad_request(f"this model ({self.family.label}) takes no instructions")


def _terminal(
    rid: str, reason: FinishReason, usage: Usage, error: ErrorInfo | None = None
) -> Delta:
    return Delta(rid, finish_reason=reason, usage=usage, error=error)


def _drain(generator: Generator[None, None, Any]) -> Any:
    while True:
        try:
            next(generator)
        except StopIteration as done:
            return done.value


def load_tts_engine(
    path: str,
    served_name: str | None = None,
    streaming_interval: float = DEFAULT_STREAMING_INTERVAL,
    voice_cache_bytes: int = DEFAULT_VOICE_CACHE_BYTES,
) -> TtsEngine:
    """Load a local mlx-audio TTS checkpoint directory into a TtsEngine.

    Raises ValueError naming the supported families when the checkpoint's family is not one.
    """
    directory = Path(path).expanduser()
    family = family_for(directory)  # before any weights are read
    from mlx_audio.tts.utils import load_model

    # mlx-audio prints progress to stdout, which belongs to whoever runs this process;
    # transformers warns that a TTS config is not one of its model types, which is expected.
    with contextlib.redirect_stdout(sys.stderr), _quiet_transformers():
        model = load_model(directory)
    if family.name == "qwen3_tts" and model.speech_tokenizer is None:
        # mlx-audio only prints a warning when the codec does not load.
        raise ValueError(f"{directory}: the speech tokenizer (speech_tokenizer/) did not load")
    try:
        with contextlib.redirect_stdout(sys.stderr):
            family.prepare(model)
    except Exception as exc:
        raise ValueError(f"{directory}: {family.label} could not load: {exc}") from exc
    return TtsEngine(
        model,
        family,
        directory,
        served_name or directory.name,
        streaming_interval=streaming_interval,
        max_tokens=_max_new_tokens(directory),
        voice_cache_bytes=voice_cache_bytes,
    )


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def _max_new_tokens(directory: Path) -> int | None:
    """generation_config.json's max_new_tokens, the cap mlx-audio's Qwen3-TTS itself reads."""
    config = directory / "generation_config.json"
    if not config.is_file():
        return None
    value = json.loads(config.read_text()).get("max_new_tokens")
    return value if isinstance(value, int) and value > 0 else None
