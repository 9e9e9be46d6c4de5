"""Whisper transcription one 30-second window at a time, exactly as mlx-audio transcribes.

`mlx_audio`'s `Model.generate` runs every window of a file in one call, which would let an
hour of audio hold the MLX thread with no chance to abort. `WhisperRun` is the same algorithm
(language detection, temperature fallback, conditioning on the previous text, timestamp
segments, seeking to the last timestamp, word timestamps by cross-attention alignment) cut at
the window boundary: each `advance()` decodes one window with mlx-audio's own decoding
functions, so the text and segments equal a direct `model.generate(audio, ...)` with the same
options (unit-tested). Not carried over: `clip_timestamps` and the hallucination-silence
heuristic (both off by default in mlx-audio).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np
from mlx_audio.stt.models.whisper.audio import (
    FRAMES_PER_SECOND,
    HOP_LENGTH,
    N_FRAMES,
    SAMPLE_RATE,
    pad_or_trim,
)
from mlx_audio.stt.models.whisper.decoding import DecodingOptions, DecodingResult
from mlx_audio.stt.models.whisper.timing import add_word_timestamps
from mlx_audio.stt.models.whisper.tokenizer import LANGUAGES, TO_LANGUAGE_CODE
from mlx_audio.stt.models.whisper.whisper import _get_end

from protocol.messages import Segment
from worker.runtime.errors import bad_request

# mlx-audio's defaults for Model.generate.
TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
COMPRESSION_RATIO_THRESHOLD = 2.4
LOGPROB_THRESHOLD = -1.0
NO_SPEECH_THRESHOLD = 0.6
PREPEND_PUNCTUATIONS = "\"'“¿([{-"
APPEND_PUNCTUATIONS = "\"'.。,，!！?？:：”)]}、"


@dataclass(frozen=True, slots=True)
class WhisperOptions:
    language: str | None  # a Whisper language code; None: detect from the first window
    task: str  # "transcribe" | "translate"
    temperatures: tuple[float, ...]  # tried in order while a window's decode looks failed
    initial_prompt: str | None
    word_timestamps: bool


def build_in_float32(model: Any, path: str) -> None:
    """A Whisper `mlx_audio.stt.load(path, lazy=True)` built as `Model(dims, mx.float32)`
    would be: the stored weights cast to float32 (not through mlx-audio's float16), the
    encoder's sinusoids too, and `dtype` (which the mel is cast to and decoding reads) set.
    Call before the weights are evaluated, so the float16 copies are never made."""
    from pathlib import Path

    from mlx_audio.utils import load_weights

    model.dtype = mx.float32
    model.load_weights(list(model.sanitize(load_weights(Path(path))).items()))
    encoder = model.encoder
    encoder._positional_embedding = encoder._positional_embedding.astype(mx.float32)


def whisper_language(model: Any, value: str | None) -> str | None:
    """The Whisper code for a requested language (code or English name), or a RequestError."""
    if value is None:
        return None
    key = value.strip().lower()
    code = key if key in LANGUAGES else TO_LANGUAGE_CODE.get(key)
    if not model.is_multilingual:
        if code != "en":
            raise bad_request(f"`language`: this model transcribes English only, not {value!r}")
        return code
    known = list(LANGUAGES)[: model.num_languages]
    if code not in known:
        raise bad_request(
            f"`language`: unknown language {value!r}; use an ISO-639-1 code this model "
            f"knows, e.g. 'en', 'de', 'fr' ({len(known)} languages)"
        )
    return code


class WhisperRun:
    """One request's transcription: `advance()` decodes the next window until `done`."""

    def __init__(self, model: Any, audio: np.ndarray, options: WhisperOptions) -> None:
        self._model = model
        self._audio: np.ndarray | None = audio
        self._options = options
        self._mel: mx.array | None = None
        self._content_frames = 0
        self._tokenizer: Any = None
        self._decode_options: dict[str, Any] = {}
        self.language = options.language or ""
        self._seek = 0
        self._all_tokens: list[int] = []
        self._prompt_tokens = 0
        self._prompt_reset_since = 0
        self._last_speech_timestamp = 0.0
        self._segments: list[dict[str, Any]] = []
        self.done = False

    # -- what the engine reads -------------------------------------------------------------

    def transcript(self) -> str:
        """The text so far (all windows decoded at once, as mlx-audio's final text)."""
        if self._tokenizer is None:
            return ""
        return self._tokenizer.decode(self._all_tokens[self._prompt_tokens :])

    def segments(self) -> list[Segment]:
        return [_segment(s) for s in self._segments]

    @property
    def completion_tokens(self) -> int:
        return len(self._all_tokens) - self._prompt_tokens

    # -- the work --------------------------------------------------------------------------

    def advance(self) -> None:
        """Decode one window (the first call also computes the mel and the language)."""
        if self._mel is None:
            self._prepare()
        if self._seek >= self._content_frames:
            self.done = True
            return
        self._decode_window()
        self.done = self._seek >= self._content_frames

    def _prepare(self) -> None:
        model, options = self._model, self._options
        self._mel, self._content_frames = model._prepare_audio(mx.array(self._audio))
        self._audio = None
        self.language = model._detect_language(self._mel, language=options.language)
        self._decode_options = {
            "without_timestamps": False,
            "language": self.language,
            "task": options.task,
            "fp16": model.dtype == mx.float16,  # float32: build_in_float32
        }
        self._tokenizer = model.get_tokenizer(language=self.language, task=options.task)
        if options.initial_prompt is not None:
            prompt = self._tokenizer.encode(" " + options.initial_prompt.strip())
            self._all_tokens.extend(prompt)
            self._prompt_tokens = len(prompt)

    def _decode_window(self) -> None:
        model, tokenizer, options = self._model, self._tokenizer, self._options
        seek = self._seek
        input_stride = N_FRAMES // model.dims.n_audio_ctx  # mel frames per output token
        time_precision = input_stride * HOP_LENGTH / SAMPLE_RATE  # seconds per timestamp step
        time_offset = float(seek * HOP_LENGTH / SAMPLE_RATE)
        segment_size = min(N_FRAMES, self._content_frames - seek)
        segment_duration = segment_size * HOP_LENGTH / SAMPLE_RATE
        mel_segment = self._mel[seek : seek + segment_size]
        mel_segment = pad_or_trim(mel_segment, N_FRAMES, axis=-2).astype(model.dtype)

        self._decode_options["prompt"] = self._all_tokens[self._prompt_reset_since :]
        result = self._decode_with_fallback(mel_segment)
        tokens = np.array(result.tokens)

        should_skip = result.no_speech_prob > NO_SPEECH_THRESHOLD
        if result.avg_logprob > LOGPROB_THRESHOLD:
            should_skip = False  # confident text despite the no-speech probability
        if should_skip:
            self._seek = seek + segment_size
            return

        def new_segment(start: float, end: float, window_tokens: np.ndarray) -> dict[str, Any]:
            token_list = window_tokens.tolist()
            return {
                "seek": seek,
                "start": float(start),
                "end": float(end),
                "text": tokenizer.decode([t for t in token_list if t < tokenizer.eot]),
                "tokens": token_list,
                "temperature": result.temperature,
                "avg_logprob": result.avg_logprob,
                "compression_ratio": result.compression_ratio,
                "no_speech_prob": result.no_speech_prob,
            }

        current: list[dict[str, Any]] = []
        is_timestamp = tokens >= tokenizer.timestamp_begin
        single_timestamp_ending = is_timestamp[-2:].tolist() == [False, True]
        consecutive = np.where(np.logical_and(is_timestamp[:-1], is_timestamp[1:]))[0] + 1
        if len(consecutive) > 0:
            # Two timestamps in a row close one segment and open the next.
            slices = consecutive.tolist()
            if single_timestamp_ending:
                slices.append(len(tokens))
            last_slice = 0
            for current_slice in slices:
                sliced = tokens[last_slice:current_slice]
                start = sliced[0].item() - tokenizer.timestamp_begin
                end = sliced[-1].item() - tokenizer.timestamp_begin
                current.append(
                    new_segment(
                        time_offset + start * time_precision,
                        time_offset + end * time_precision,
                        sliced,
                    )
                )
                last_slice = current_slice
            if single_timestamp_ending:
                seek += segment_size  # no speech after the last timestamp
            else:
                # The last segment is unfinished: the next window starts at its timestamp.
                last_timestamp = tokens[last_slice - 1].item() - tokenizer.timestamp_begin
                seek += last_timestamp * input_stride
        else:
            duration = segment_duration
            timestamps = tokens[is_timestamp.nonzero()[0]]
            if len(timestamps) > 0 and timestamps[-1].item() != tokenizer.timestamp_begin:
                duration = (timestamps[-1].item() - tokenizer.timestamp_begin) * time_precision
            current.append(new_segment(time_offset, time_offset + duration, tokens))
            seek += segment_size

        if options.word_timestamps:
            add_word_timestamps(
                segments=current,
                model=model,
                tokenizer=tokenizer,
                mel=mel_segment,
                num_frames=segment_size,
                prepend_punctuations=PREPEND_PUNCTUATIONS,
                append_punctuations=APPEND_PUNCTUATIONS,
                last_speech_timestamp=self._last_speech_timestamp,
            )
            if not single_timestamp_ending:
                last_word_end = _get_end(current)
                if last_word_end is not None and last_word_end > time_offset:
                    seek = round(last_word_end * FRAMES_PER_SECOND)
            last_word_end = _get_end(current)
            if last_word_end is not None:
                self._last_speech_timestamp = last_word_end

        for segment in current:  # an instantaneous or empty segment keeps no text
            if segment["start"] == segment["end"] or segment["text"].strip() == "":
                segment["text"] = ""
                segment["tokens"] = []
                segment["words"] = []
        first_id = len(self._segments)
        self._segments.extend({"id": first_id + i, **s} for i, s in enumerate(current))
        self._all_tokens.extend(t for s in current for t in s["tokens"])
        if result.temperature > 0.5:
            # Text sampled hot is a poor prompt for the next window.
            self._prompt_reset_since = len(self._all_tokens)
        self._seek = seek

    def _decode_with_fallback(self, mel_segment: mx.array) -> DecodingResult:
        """mlx-audio's fallback: decode hotter while the text looks repetitive or unlikely."""
        result = None
        for temperature in self._options.temperatures:
            options = DecodingOptions(**self._decode_options, temperature=temperature)
            result = self._model.decode(mel_segment, options)
            needs_fallback = (
                result.compression_ratio > COMPRESSION_RATIO_THRESHOLD
                or result.avg_logprob < LOGPROB_THRESHOLD
            )
            if (
                result.no_speech_prob > NO_SPEECH_THRESHOLD
                and result.avg_logprob < LOGPROB_THRESHOLD
            ):
                needs_fallback = False  # silence: no temperature will do better
            if not needs_fallback:
                break
        assert result is not None
        return result


def _segment(raw: dict[str, Any]) -> Segment:
    words = [[w["word"], w["start"], w["end"]] for w in raw.get("words") or []]
    return Segment(
        raw["id"],
        raw["start"],
        raw["end"],
        raw["text"],
        words,
        seek=int(raw["seek"]),
        tokens=[int(t) for t in raw["tokens"]],
        temperature=float(raw["temperature"]),
        avg_logprob=float(raw["avg_logprob"]),
        compression_ratio=float(raw["compression_ratio"]),
        no_speech_prob=float(raw["no_speech_prob"]),
    )
