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
    VIDEO_IN = "video_in"  # chat takes video parts
    SPEECH = "speech"  # text -> speech
    TRANSCRIBE = "transcribe"  # speech -> text
    TRANSLATE = "translate"  # speech -> English text (multilingual Whisper)
    EMBED = "embed"  # texts -> vectors
    RERANK = "rerank"  # a query against documents, sorted by relevance (/v1/rerank)
    SCORE = "score"  # relevance scores of text pairs (/v1/score)
    IMAGE_OUT = "image_out"  # a prompt -> pictures (/v1/images/generations)
    IMAGE_EDIT = "image_edit"  # a picture + a prompt -> pictures (/v1/images/edits)
    VIDEO_OUT = "video_out"  # a prompt -> a video clip with sound (/v1/videos)


class Adapter(WireStruct):
    """A LoRA adapter loaded on the text model: the name requests use, its directory."""

    name: str
    path: str


class TextInfo(WireStruct):
    """The chat model (text on mlx-lm, or vision on mlx-vlm)."""

    max_context: int | None  # tokens; None when the checkpoint does not say
    batching: str  # "continuous" (BatchGenerator) or "interleaved batch-1"
    # The speakers of the model's own talker (Qwen3-Omni with audio output), [] without one.
    talker_speakers: list[str] = []
    # The LoRA adapters loaded (at start, from --lora), None where the model takes none.
    adapters: list[Adapter] | None = None


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


class EmbeddingInfo(WireStruct):
    """The embedding model (an encoder on mlx-embeddings, or a decoder on mlx-lm) and its
    limits, which the gateway checks before the worker sees a request."""

    model_path: str
    backend: str  # "mlx-embeddings" (encoders) or "mlx-lm" (decoders, last-token pooling)
    model_type: str  # config.json's, e.g. "bert", "qwen3"
    dimensions: int  # of a vector
    pooling: str  # "mean", "cls", "max", "lasttoken", "mean_sqrt_len" (sentence-transformers)
    normalize: bool  # vectors have unit length
    max_input_tokens: int  # tokens of one input, special tokens included
    max_inputs: int  # inputs of one request
    max_total_tokens: int  # tokens of one request, all inputs together
    matryoshka: bool = False  # trained for shorter vectors: requests may ask for `dimensions`
    matryoshka_dimensions: list[int] = []  # the sizes it takes; [] any size up to dimensions


class ScoreInfo(WireStruct):
    """The model that scores (query, document) pairs and how it does: `method` is
    "cross-encoder" (a sequence-classification head on the pair), "llm-yes-no" (an LLM
    reranker: P(yes) of its yes/no answer under its prompt template) or "embedding-cosine"
    (the embedding model's vectors, when no reranker is served)."""

    model_path: str
    method: str
    model_type: str  # config.json's, e.g. "bert", "qwen3"
    max_input_tokens: int  # tokens of one pair (the embedding fallback: of one text)
    max_documents: int  # documents of one request
    max_total_tokens: int  # tokens of one request, all pairs together


class ImageInfo(WireStruct):
    """The image-generation model (mlx-vlm) and the sizes and steps it takes, which the
    gateway checks before the worker sees a request."""

    model_path: str
    family: str  # mlx-vlm's model type, e.g. "z_image", "moss_image"
    default_steps: int
    default_guidance: float
    min_steps: int
    max_steps: int
    min_side: int  # pixels, width and height alike
    max_side: int
    side_multiple: int  # width and height are multiples of it
    edit: bool  # takes a picture to edit (/v1/images/edits)
    previews: bool  # can show partial images while it denoises
    max_guidance: float | None = None  # the largest guidance scale it takes (None: any)
    default_edit_steps: int | None = None  # an edit's default steps (None: default_steps)


class VideoInfo(WireStruct):
    """The video-generation model (mlx-vlm) and the clips it makes, which the gateway checks
    before the worker sees a request."""

    model_path: str
    family: str  # mlx-vlm's model type, e.g. "minimax_h3"
    default_steps: int
    min_steps: int
    max_steps: int
    default_width: int  # pixels
    default_height: int
    side_multiple: int  # width and height are multiples of it
    max_pixels: int  # width x height
    max_aspect: float  # the longer side over the shorter, at most
    min_seconds: float
    max_seconds: float
    fps: float
    max_prompt_tokens: int
