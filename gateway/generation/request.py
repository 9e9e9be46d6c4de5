"""What every chat-style API's parser hands the generation layer: typed inputs, n, stream.

The three HTTP APIs (OpenAI chat / completions, Anthropic Messages, OpenAI Responses) differ in
their bodies and their output shapes, not in what they ask the worker: each parser ends in one
`GenerationRequest`, and `generation.py` runs it the same way for all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from msgspec.structs import replace

from gateway.media.parts import MediaItem
from protocol.inputs import ChatInputs, CompleteInputs, SamplingParams


@dataclass(frozen=True, slots=True)
class AudioOut:
    """Chat completions `modalities: ["text", "audio"]`: speak the answer
    (gateway/api/chat_completions/audio_out.py)."""

    voice: str
    voice_by_id: bool  # OpenAI's {"id": ...} form: a saved voice's id
    format: str  # wav | mp3 | flac | opus | aac | pcm16


@dataclass(slots=True)
class GenerationRequest:
    model: str
    inputs: ChatInputs | CompleteInputs  # what one choice's Submit carries, sampling included
    stream: bool
    include_usage: bool = False
    n: int = 1  # choices: one worker request each
    echo: str | None = None  # completions `echo`: the prompt text each choice starts with
    # Image / audio parts, fetched and checked into the inputs' `images` / `audios` just
    # before the Submit (gateway/media/resolve.py); empty for text-only requests.
    media: tuple[MediaItem, ...] = ()
    audio_out: AudioOut | None = None  # chat completions with audio output
    # The field that set `sampling.max_tokens` when the client gave it ("max_tokens",
    # "max_completion_tokens", "max_output_tokens"); None when the server's default did.
    max_tokens_field: str | None = None
    # Audio parts the served recognizer turned into text for a model that cannot hear
    # (gateway/generation/audio_parts.py); said in the usage.
    transcribed_audio_parts: int = 0
    # The request's own `timeout` as a time.time() moment (None: none); its route sets it for
    # the request's Submits (gateway/request_context.TIME_LIMIT).
    time_limit: float | None = None

    @property
    def sampling(self) -> SamplingParams:
        return self.inputs.sampling

    def choices(
        self, media: dict[str, list[bytes]] | None = None
    ) -> list[ChatInputs | CompleteInputs]:
        """Every choice's inputs, with the resolved `media` bytes; with a seed, choice i gets
        seed + i (so n choices differ from each other yet each is reproducible)."""
        inputs = replace(self.inputs, **media) if media else self.inputs
        if self.n == 1:
            return [inputs]
        seed = self.sampling.seed
        return [
            replace(
                inputs,
                sampling=replace(self.sampling, seed=None if seed is None else (seed + i) % 2**64),
            )
            for i in range(self.n)
        ]
