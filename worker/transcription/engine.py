"""The speech-in engine: `Op.TRANSCRIBE` (and translation to English) over mlx-audio STT models.

`load_stt_engine(path)` loads any speech-recognition family `mlx_audio.stt.load` reads
(Whisper, Qwen3-ASR, Parakeet, ...) and fails at start, naming the supported families, for
anything else. Submit.inputs is a `protocol.inputs.TranscribeInputs`: the uploaded file
(decoded here, never in the gateway) and its name, the language (ISO-639-1 or an English
name; None: detect), the prompt (Whisper's initial prompt, Qwen3-ASR's system prompt), the
temperature (None or 0: Whisper's fallback ladder 0, 0.2, ... 1.0), the task (transcribe or
translate) and the timestamp granularities.

Each `step()` transcribes one window (Whisper: 30 s) of every active request, so an abort
takes effect between windows. Text deltas carry what the windows so far made certain (see
`worker.transcription.text`); the terminal delta carries the segments (with words when asked), the
detected language and usage: prompt_tokens = audio seconds rounded up, completion_tokens =
text tokens generated.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from protocol.inputs import Op, TranscribeInputs
from protocol.messages import Delta, ErrorInfo, FinishReason, Segment, Submit, Usage
from protocol.ready import Capability, TranscriptionInfo
from worker.runtime.errors import RequestError, bad_request, internal
from worker.runtime.request_log import named
from worker.transcription.audio_decode import decode_audio
from worker.transcription.family import require_stt_family
from worker.transcription.text import TranscriptDeltas
from worker.transcription.timing import bounded_segments

log = logging.getLogger(__name__)

TASKS = ("transcribe", "translate")
GRANULARITIES = ("segment", "word")
DEFAULT_SAMPLE_RATE = 16000
# Where each family takes the `prompt` (context), in order of preference.
PROMPT_PARAMETERS = ("initial_prompt", "system_prompt", "context")
# Families whose `language` argument is a language name ("English") rather than a code.
LANGUAGE_BY_NAME = frozenset({"qwen3_asr"})


class Run(Protocol):
    """One request's transcription in progress (WhisperRun, ChunkedRun)."""

    done: bool
    language: str

    def advance(self) -> None: ...

    def transcript(self) -> str: ...

    def segments(self) -> list[Segment]: ...

    @property
    def completion_tokens(self) -> int: ...


@dataclass(slots=True)
class _Active:
    request_id: str
    run: Run
    deltas: TranscriptDeltas
    duration: float  # of the audio, in seconds

    def usage(self) -> Usage:
        return Usage(math.ceil(self.duration), self.run.completion_tokens)


def load_stt_engine(path: str, dtype: str = "auto") -> SttEngine:
    """Load the speech-recognition checkpoint at `path`; UnsupportedSpeechModel names the
    families that would work when it is not one.

    mlx-audio builds Whisper in float16 whatever the checkpoint stores. `dtype` "float32"
    (the worker's --dtype) builds it in float32 instead: on a CPU, MLX runs float16 matmuls
    on its own single-threaded kernels and float32 ones on BLAS (OpenBLAS when preloaded),
    several times faster (docs/speech.md, "Whisper in float32 on a CPU"). Any other `dtype`,
    and every other family, keep mlx-audio's types. On the CPU a Whisper encoder's attention
    heads run on two streams, with the same numbers (worker/transcription/whisper_fast.py),
    and on any device its tokenizer's no-speech id is looked up once (whisper_tokens.py).
    """
    family = require_stt_family(path)
    import mlx.core as mx
    from mlx_audio.stt import load

    model = load(path, lazy=dtype == "float32")
    if dtype == "float32" and _is_whisper(model):
        from worker.transcription.whisper import build_in_float32

        build_in_float32(model, path)
    if _is_whisper(model):
        from worker.transcription import whisper_fast, whisper_tokens

        whisper_fast.install(model)  # on the CPU: the encoder's heads on two streams
        whisper_tokens.install()  # the no-speech token id looked up once
    mx.eval(model.parameters())
    return SttEngine(model, path, family)


def _is_whisper(model: Any) -> bool:
    return type(model).__module__.startswith("mlx_audio.stt.models.whisper")


class SttEngine:
    """`worker.runtime.engine.Engine` for speech in; runs on the MLX thread only."""

    ops = frozenset({Op.TRANSCRIBE})

    def __init__(self, model: Any, path: str, family: str) -> None:
        self.model = model
        self.path = path
        self.is_whisper = _is_whisper(model)
        self.family = "whisper" if self.is_whisper else family
        self.sample_rate = _sample_rate(model, self.is_whisper)
        self._generate_params = set(inspect.signature(model.generate).parameters)
        self._active: dict[str, _Active] = {}
        self.stats: Any = None  # the worker's WorkerStats, once bound: audio transcribed

    # -- Engine ----------------------------------------------------------------------------

    def bind_stats(self, stats: Any) -> None:
        self.stats = stats

    def capabilities(self) -> list[Capability]:
        caps = [Capability.TRANSCRIBE]
        if self.is_whisper and self.model.is_multilingual:
            caps.append(Capability.TRANSLATE)
        return caps

    def ready_info(self) -> TranscriptionInfo:
        return TranscriptionInfo(self.path, self.family, self.sample_rate, self.is_whisper)

    def active_ids(self) -> list[str]:
        return list(self._active)

    def admit(self, submit: Submit) -> Delta:
        rid = submit.request_id
        if rid in self._active:
            return _failed(rid, bad_request(f"request id {rid!r} is already in use").info())
        try:
            assert isinstance(submit.inputs, TranscribeInputs)  # the scheduler routes by op
            run, duration = self._start(submit.inputs)
        except RequestError as exc:
            return _failed(rid, exc.info())
        except Exception as exc:
            log.exception("transcription %s could not start", rid, extra=named(rid))
            return _failed(rid, internal(exc))
        self._active[rid] = _Active(rid, run, TranscriptDeltas(), duration)
        return Delta(rid)

    def step(self) -> list[Delta]:
        """One window of every active request, in admission order."""
        deltas = []
        for active in list(self._active.values()):
            deltas.append(self._advance(active))
        return deltas

    def abort(self, request_ids: Iterable[str]) -> list[Delta]:
        deltas = []
        for rid in request_ids:
            active = self._active.pop(rid, None)
            if active is not None:
                deltas.append(Delta(rid, finish_reason=FinishReason.ABORT, usage=active.usage()))
        return deltas

    # -- internals -------------------------------------------------------------------------

    def _advance(self, active: _Active) -> Delta:
        rid = active.request_id
        try:
            active.run.advance()
            transcript = active.run.transcript()
        except RequestError as exc:
            del self._active[rid]
            return Delta(
                rid, finish_reason=FinishReason.ERROR, usage=active.usage(), error=exc.info()
            )
        except Exception as exc:
            log.exception("transcription %s failed", rid, extra=named(rid))
            del self._active[rid]
            error = internal(exc)
            return Delta(rid, finish_reason=FinishReason.ERROR, usage=active.usage(), error=error)
        if not active.run.done:
            return Delta(rid, text=active.deltas.update(transcript))
        del self._active[rid]
        if self.stats is not None:
            self.stats.count_transcribed(active.duration)
        return Delta(
            rid,
            text=active.deltas.finish(transcript),
            finish_reason=FinishReason.STOP,
            usage=active.usage(),
            segments=bounded_segments(active.run.segments(), active.duration),
            language=active.run.language,
        )

    def _start(self, inputs: TranscribeInputs) -> tuple[Run, float]:
        options = _parse_inputs(inputs)
        if options["task"] == "translate" and "translate" not in self.capabilities():
            raise bad_request(f"this model ({self.family}) cannot translate; use transcriptions")
        words = "word" in options["timestamps"]
        if words and not self.is_whisper:
            raise bad_request(
                f"`timestamp_granularities`: word timestamps need a Whisper model, not {self.family}"
            )
        if self.is_whisper:
            from worker.transcription.whisper import whisper_language

            language = whisper_language(self.model, options["language"])
        else:
            language = self._generic_language(options["language"])
        audio = decode_audio(options["audio"], options["filename"], self.sample_rate)
        duration = len(audio) / self.sample_rate
        if self.is_whisper:
            return self._whisper_run(audio, options, language, words), duration
        return self._generic_run(audio, options, language), duration

    def _whisper_run(
        self, audio: np.ndarray, options: dict[str, Any], language: str | None, words: bool
    ) -> Run:
        from worker.transcription.whisper import TEMPERATURES, WhisperOptions, WhisperRun

        temperature = options["temperature"]
        temperatures = (temperature,) if temperature else TEMPERATURES
        whisper = WhisperOptions(language, options["task"], temperatures, options["prompt"], words)
        return WhisperRun(self.model, audio, whisper)

    def _generic_run(self, audio: np.ndarray, options: dict[str, Any], language: Any) -> Run:
        from worker.transcription.generic import ChunkedRun

        params, kwargs = self._generate_params, {}
        if "verbose" in params:
            kwargs["verbose"] = False
        if language is not None:
            kwargs["language"] = language
        if options["prompt"] is not None:
            name = next((p for p in PROMPT_PARAMETERS if p in params), None)
            if name is None:
                raise bad_request(f"`prompt` is not supported by this model ({self.family})")
            kwargs[name] = options["prompt"]
        if options["temperature"]:
            if "temperature" not in params:
                raise bad_request(f"`temperature` is not supported by this model ({self.family})")
            kwargs["temperature"] = options["temperature"]
        requested = options["language"]
        return ChunkedRun(self.model, audio, self.sample_rate, kwargs, requested)

    def _generic_language(self, value: str | None) -> Any:
        if value is None:
            return None
        if "language" not in self._generate_params:
            raise bad_request(
                f"`language` is not supported by this model ({self.family}): it detects "
                "the language itself"
            )
        from mlx_audio.stt.models.whisper.tokenizer import LANGUAGES, TO_LANGUAGE_CODE

        key = value.strip().lower()
        code = key if key in LANGUAGES else TO_LANGUAGE_CODE.get(key)
        if code is None:
            raise bad_request(f"`language`: unknown language {value!r}; use an ISO-639-1 code")
        return LANGUAGES[code].title() if self.family in LANGUAGE_BY_NAME else code


def _parse_inputs(inputs: TranscribeInputs) -> dict[str, Any]:
    """Checked Submit.inputs; RequestError naming the first bad field (types are the
    protocol's: checked when the Submit was decoded)."""
    audio, language, temperature = inputs.audio, inputs.language, inputs.temperature
    task, timestamps = inputs.task, inputs.timestamps or ["segment"]
    if not audio:
        raise bad_request("`file` is required: the audio file to transcribe")
    if language is not None and not language.strip():
        raise bad_request("`language` must be a non-empty string")
    if temperature is not None and not 0.0 <= temperature <= 1.0:
        raise bad_request("`temperature` must be between 0 and 1")
    if task not in TASKS:
        raise bad_request(f"`task` must be one of {', '.join(TASKS)}")
    if any(g not in GRANULARITIES for g in timestamps):
        raise bad_request("`timestamp_granularities` may hold only 'segment' and 'word'")
    return {
        "audio": audio,
        "filename": inputs.filename,
        "language": language,
        "prompt": inputs.prompt,
        "temperature": float(temperature) if temperature is not None else None,
        "task": task,
        "timestamps": timestamps,
    }


def _sample_rate(model: Any, is_whisper: bool) -> int:
    if is_whisper:
        from mlx_audio.stt.models.whisper.audio import SAMPLE_RATE

        return SAMPLE_RATE
    for owner in (model, getattr(model, "config", None)):
        rate = getattr(owner, "sample_rate", None)
        if isinstance(rate, int) and rate > 0:
            return rate
    return DEFAULT_SAMPLE_RATE


def _failed(request_id: str, error: ErrorInfo) -> Delta:
    return Delta(request_id, finish_reason=FinishReason.ERROR, usage=Usage(0, 0), error=error)
