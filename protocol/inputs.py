"""What a Submit asks for: one typed structure per operation, tagged by the operation's name.

`Submit.inputs` is one of these; its tag (the first element of its wire array) is the
operation, so the worker routes a request by the type of its inputs. Sampling parameters
travel only with the operations that sample tokens (chat, complete); speech carries its own
seed, transcription its temperature. Chat messages, tools and template variables stay JSON
objects: the chat template reads them as such.
"""

from __future__ import annotations

from typing import Any, ClassVar, Union

from msgspec import field

from protocol.wire import WireEnum, WireStruct


class Op(WireEnum):
    """Operations a Submit can ask for (the tags of the inputs structures)."""

    CHAT = "chat"
    COMPLETE = "complete"
    SPEECH = "speech"  # text -> PCM
    TRANSCRIBE = "transcribe"  # audio -> text (or translated text)
    EMBED = "embed"  # texts / token ids -> vectors
    SCORE = "score"  # (query, document) pairs -> relevance scores (rerank, score)
    IMAGE = "image"  # a prompt (and a picture to edit) -> pictures
    VIDEO = "video"  # a prompt -> a video clip with its sound


class JsonObject(WireStruct, tag="json_object"):
    """Constrained decoding: any JSON object."""


class JsonSchema(WireStruct, tag="json_schema"):
    """Constrained decoding: JSON valid under `schema`."""

    schema: dict[str, Any]
    name: str | None = None
    strict: bool | None = None
    field: str | None = None  # the request field that gave the schema, for errors


class Regex(WireStruct, tag="regex"):
    """Constrained decoding: the whole output matches `pattern` (Rust regex syntax).

    `field` is the request field that gave it (e.g. `structured_outputs.regex`), named in a
    400 when the pattern cannot be compiled; the same holds for Choice and Grammar."""

    pattern: str
    field: str


class Choice(WireStruct, tag="choice"):
    """Constrained decoding: the output is exactly one of `options`."""

    options: list[str]
    field: str


class Grammar(WireStruct, tag="grammar"):
    """Constrained decoding: the output is a sentence of a Lark grammar (llguidance's dialect,
    which also takes `%json` schemas and regexes as terminals)."""

    lark: str
    field: str


Constraint = Union[JsonObject, JsonSchema, Regex, Choice, Grammar]  # noqa: UP007


class SamplingParams(WireStruct):
    """Per-request sampling. None means "the checkpoint's default" (generation_config.json)."""

    max_tokens: int
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: int | None = None
    logit_bias: dict[int, float] | None = None
    stop: list[str] = []
    logprobs: int | None = None  # None: off; k >= 0: the chosen token's logprob + top k others
    constraint: Constraint | None = None  # response_format, structured_outputs: by grammar


# A video part's frame budget when the request names none (gateway/media/parts.py).
VIDEO_MAX_FRAMES_DEFAULT = 32


class ChatInputs(WireStruct, tag=Op.CHAT.value):
    """A chat through the model's chat template. `messages` are the worker's shape:
    {"role", "content" (a string, or for media models ordered parts {"type": "text" |
    "image" | "audio" | "video", ...}; a video part may carry its frame sampling, "fps" and
    "max_frames"), "tool_calls", "tool_call_id", "reasoning_content"}."""

    op: ClassVar[Op] = Op.CHAT
    messages: list[dict[str, Any]]
    sampling: SamplingParams
    chat_template_kwargs: dict[str, Any] = {}
    tools: list[dict[str, Any]] = []  # {"type": "function", "function": {name, ...}}
    tool_choice: str | dict[str, Any] | None = None  # auto | none | required | a function
    parallel_tool_calls: bool | None = None
    thinking_budget: int | None = None  # reasoning tokens before the think block is closed
    images: list[bytes] = []  # the files of the messages' image parts, in order
    audios: list[bytes] = []  # the files of the messages' audio parts, in order
    videos: list[bytes] = []  # the files of the messages' video parts, in order
    # Speak the answer with the model's own talker, as this speaker (TextInfo.talker_speakers).
    talker_speaker: str | None = None


class CompleteInputs(WireStruct, tag=Op.COMPLETE.value):
    """A completion of `prompt`, encoded as mlx-lm's `stream_generate` would encode it."""

    op: ClassVar[Op] = Op.COMPLETE
    prompt: str | list[int]
    sampling: SamplingParams


class SpeechInputs(WireStruct, tag=Op.SPEECH.value):
    """Text to speech. A voice by name, or reference audio (and its transcript) to clone."""

    op: ClassVar[Op] = Op.SPEECH
    input: str
    voice: str | None = None
    instructions: str | None = None  # a voice description or style prompt
    language: str | None = None
    speed: float | None = None
    seed: int | None = None
    ref_audio: bytes | None = None  # an audio file of the voice to clone
    ref_text: str | None = None  # its transcript
    sample_format: str = "int16"  # of Delta.audio (the only one the gateway asks for)
    # The phrase before this one, as its terminal delta handed it back (Delta.speech_context):
    # the model goes on from it (worker/speech/continuation.py). Opaque to the gateway.
    context: bytes | None = None


class TranscribeInputs(WireStruct, tag=Op.TRANSCRIBE.value):
    """An uploaded audio file to transcribe, or to translate to English."""

    op: ClassVar[Op] = Op.TRANSCRIBE
    audio: bytes  # the file as uploaded; the worker decodes and resamples it
    filename: str = ""
    language: str | None = None  # ISO-639-1; None: detect
    prompt: str | None = None
    temperature: float | None = None  # None: Whisper's fallback ladder
    task: str = "transcribe"  # or "translate"
    timestamps: list[str] = field(default_factory=lambda: ["segment"])  # and/or "word"


class EmbedInputs(WireStruct, tag=Op.EMBED.value):
    """Texts (or token ids, taken as they are) to embed, one vector each, in order.

    Texts are tokenized with the model's special tokens (as sentence-transformers does);
    token-id lists are the model's input as given. `truncate`: None refuses an input longer
    than the model takes (a 400 naming its index); k > 0 keeps its first k tokens (a text's
    special tokens kept); -1 keeps as many as the model takes. `dimensions` truncates every
    vector to its first d values (then renormalised when the model normalises): only for a
    model trained for it (EmbeddingInfo.matryoshka).
    """

    op: ClassVar[Op] = Op.EMBED
    input: list[str | list[int]]  # texts, or token-id lists
    dimensions: int | None = None
    truncate: int | None = None


class ScoreInputs(WireStruct, tag=Op.SCORE.value):
    """(query, document) pairs to score, one score per document, in order.

    Pair i is (queries[i], documents[i]), or (queries[0], documents[i]) when there is one query
    (rerank: one query against many documents; vLLM's score: 1:N or N:N). `truncate`: None
    refuses a pair longer than the model takes (a 400 naming its document); k > 0 cuts each
    pair's tokens to k (the embedding fallback: each text); -1: the model's limit. How the
    worker scores is ScoreInfo.method: a cross-encoder's logit (or its activation), an LLM
    reranker's P(yes), or the cosine of an embedding model's vectors.
    """

    op: ClassVar[Op] = Op.SCORE
    queries: list[str]
    documents: list[str]
    truncate: int | None = None


# The largest seed an image or video request names (the worker draws its own from 0 to this).
MAX_SEED = 2**31 - 1


class ImageInputs(WireStruct, tag=Op.IMAGE.value):
    """Pictures from a prompt, or `image` edited as the prompt says (mlx-vlm's image generation).

    Picture i of `n` is generated with seed `seed + i`, exactly as one direct call with that
    seed makes it. `steps` / `guidance` None: the model's defaults (ImageInfo). With
    `partial_images` k > 0, k previews of each picture come while it denoises (the latents
    decoded after evenly spaced steps), before the picture itself.
    """

    op: ClassVar[Op] = Op.IMAGE
    prompt: str
    width: int
    height: int
    n: int = 1
    steps: int | None = None
    guidance: float | None = None
    seed: int | None = None  # None: the worker draws one (ImageOut.seed says which)
    image: bytes | None = None  # an edit: the picture's file (PNG, JPEG, WebP)
    partial_images: int = 0


class VideoInputs(WireStruct, tag=Op.VIDEO.value):
    """A clip from a prompt (mlx-vlm's video generation): `seconds` long (the model makes the
    next length its frames come in), width x height pixels. `steps` None: the model's default
    (VideoInfo). The clip is what one direct call with the same seed makes."""

    op: ClassVar[Op] = Op.VIDEO
    prompt: str
    width: int
    height: int
    seconds: float
    steps: int | None = None
    seed: int | None = None  # None: the worker draws one (VideoOut.seed says which)


Inputs = Union[  # noqa: UP007
    ChatInputs,
    CompleteInputs,
    SpeechInputs,
    TranscribeInputs,
    EmbedInputs,
    ScoreInputs,
    ImageInputs,
    VideoInputs,
]
