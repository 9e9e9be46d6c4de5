"""What a worker's Ready message says it can do: capabilities, and one section per engine kind.

The gateway answers `/v1/models`, `/v1/audio/voices` and its request checks from these; each
section is present when the worker runs an engine of that kind.
"""

from __future__ import annotations

from protocol.wire import WireEnum, WireStruct


class Capability(WireEnum):
    CHAT = "chat"
    COMPLETE = "complete"
    IMAGE_IN = "image_in"  # chat takes image parts
    AUDIO_IN = "audio_in"  # chat takes audio parts
    SPEECH = "speech"  # text -> speech
    TRANSCRIBE = "transcribe"  # speech -> text
    TRANSLATE = "translate"  # speech -> English text (multilingual Whisper)


class TextInfo(WireStruct):
    """The chat model (text on mlx-lm, or vision on mlx-vlm)."""

    max_context: int | None  # tokens; None when the checkpoint does not say
    batching: str  # "continuous" (BatchGenerator) or "interleaved batch-1"


class Voice(WireStruct):
    name: str
    language: str | None = None


class SpeechInfo(WireStruct):
    """The TTS model and what its family can do."""

    model: str  # its served name
    model_path: str
    family: str  # e.g. "qwen3_tts", "kokoro"
    voices: list[Voice]
    cloning: bool  # takes reference audio
    ref_text: bool  # uses the reference audio's transcript
    descriptions: bool  # a voice can be described in `instructions`
    instructions: bool  # takes style instructions
    languages: list[str]
    speed: bool
    streaming: bool  # PCM comes while it is generated
    sample_rate: int


class TranscriptionInfo(WireStruct):
    """The speech-recognition model."""

    model_path: str
    family: str  # e.g. "whisper"
    sample_rate: int
    word_timestamps: bool
