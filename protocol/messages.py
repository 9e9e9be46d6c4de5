"""Every message that crosses the gateway <-> worker socket pair, and the wire's enums.

Schema only: msgspec Structs, their wire tags and the protocol version. What a Submit asks for
is typed per operation in `protocol.inputs`; what a Ready says the worker can do, in
`protocol.ready`; encoding, driven by these types, in `protocol.codec`.

On the wire a message is a msgpack array `[tag, field1, field2, ...]` with fields in
declaration order; nested structures are arrays of their fields (a tagged union's first
element is its tag). Changing a tag, a field or the field order is a protocol change: bump
PROTOCOL_VERSION and update tests/unit/test_protocol.py. Ready keeps `protocol_version` and
`pid` as its first two fields in every version, so a worker of another version can be refused
by name.

Direction: gateway -> worker: Submit, Abort, ControlCall.
           worker -> gateway: Ready, Step, ControlReply, Heartbeat, Fatal.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Union

import msgspec

from protocol.inputs import ChatInputs, Inputs
from protocol.ready import (
    Adapter,
    Capability,
    EmbeddingInfo,
    ImageInfo,
    ScoreInfo,
    SpeechInfo,
    TextInfo,
    TranscriptionInfo,
    VideoInfo,
)
from protocol.wire import WireEnum, WireStruct

PROTOCOL_VERSION = 20


class Tag(IntEnum):
    """Message-kind tags: the first element of every wire array."""

    SUBMIT = 1
    ABORT = 2
    CONTROL_CALL = 3
    READY = 16
    STEP = 17
    CONTROL_REPLY = 18
    HEARTBEAT = 19
    FATAL = 20


class FinishReason(WireEnum):
    """Terminal reasons. Every submitted request gets exactly one terminal Delta."""

    STOP = "stop"  # EOS or a stop string
    TOOL_CALLS = "tool_calls"  # the model called tools (Delta.tool_calls)
    LENGTH = "length"  # max_tokens or the context window
    ABORT = "abort"  # aborted by the gateway (client gone, swap, shutdown)
    ERROR = "error"  # request-scoped failure; Delta.error says why


class ErrorCode(WireEnum):
    """Machine-readable error codes carried by ErrorInfo.code."""

    BAD_REQUEST = "bad_request"  # the input cannot be served (maps to HTTP 400)
    INTERNAL = "internal"  # a bug or an MLX failure inside one request (HTTP 500)
    WORKER_DIED = "worker_died"  # made by the gateway when the worker process is gone
    SWAP = "model_swap"  # drained past the timeout during a model swap
    DEADLINE = "deadline"  # the Submit deadline passed
    SLOW_READER = "slow_reader"  # made by the gateway: the client read audio too slowly
    CONTEXT_LENGTH = "context_length_exceeded"  # the prompt leaves no room in the context


class ControlMethod(WireEnum):
    STATS = "stats"  # the worker's counters: ControlReply.stats
    SHUTDOWN = "shutdown"  # abort everything, reply, exit 0
    COUNT_TOKENS = "count_tokens"  # prompt tokens of ControlCall.chat: ControlReply.input_tokens
    TOKENIZE = "tokenize"  # ControlCall.tokenize: ControlReply.tokenized
    DETOKENIZE = "detokenize"  # ControlCall.detokenize: ControlReply.text
    LOAD_ADAPTER = "load_adapter"  # ControlCall.adapter (name, path): ControlReply.adapters
    UNLOAD_ADAPTER = "unload_adapter"  # ControlCall.adapter (name): ControlReply.adapters


# -- gateway -> worker ---------------------------------------------------------------------


class Submit(WireStruct, tag=int(Tag.SUBMIT)):
    request_id: str
    inputs: Inputs  # the operation is the inputs' type (tagged by Op)
    stream: bool  # the client streams (the worker sends every request's deltas as they come)
    deadline: float | None = None  # time.time() after which the worker aborts it
    # The id of the HTTP request it serves (x-request-id; shared by the n choices of one
    # request), named in the worker's log lines about it. request_id stays unique.
    http_request_id: str | None = None
    # time.time() after which the worker ends it as max_tokens would: finish "length", with
    # what it generated (a request's own `timeout`; `deadline` is an error instead).
    time_limit: float | None = None
    # A LoRA adapter loaded on the text model (by its name), for a chat or a completion.
    adapter: str | None = None

    @property
    def op(self) -> str:
        return self.inputs.op


class Abort(WireStruct, tag=int(Tag.ABORT)):
    request_ids: list[str]


class TokenizeArgs(WireStruct):
    """What the `tokenize` control call encodes (vLLM's /tokenize): `prompt` as a completion's
    prompt is encoded, or else `chat` as a chat request's prompt is built (template, tools and
    all), so an unchanged request's tokens are the ones it would be served with."""

    prompt: str | None = None  # a completion's prompt text; None: tokenize `chat`
    chat: ChatInputs | None = None
    # The tokenizer's special tokens (BOS) on top of the text; None: vLLM's default, yes for
    # a prompt (as a completion encodes it: none added to a text that starts with BOS), no
    # for a chat (its template writes them).
    add_special_tokens: bool | None = None
    add_generation_prompt: bool = True  # chat: end with the assistant turn's header
    continue_final_message: bool = False  # chat: leave the last message open (a prefill)
    return_token_strs: bool = False  # also each token's string (convert_ids_to_tokens)


class DetokenizeArgs(WireStruct):
    """What the `detokenize` control call decodes: token ids of the text model's vocabulary."""

    tokens: list[int]


class AdapterArgs(WireStruct):
    """What the load_adapter / unload_adapter control calls name: an mlx-lm LoRA adapter
    directory (`path`, loading only) served on the text model as `name`."""

    name: str
    path: str | None = None
    replace: bool = False  # loading: a loaded adapter of that name gives way to this one


class ControlCall(WireStruct, tag=int(Tag.CONTROL_CALL)):
    call_id: int
    method: ControlMethod
    chat: ChatInputs | None = None  # count_tokens: the chat to count
    tokenize: TokenizeArgs | None = None  # tokenize: what to encode
    detokenize: DetokenizeArgs | None = None  # detokenize: the ids to decode
    adapter: AdapterArgs | None = None  # load_adapter, unload_adapter


# -- worker -> gateway ---------------------------------------------------------------------


class Ready(WireStruct, tag=int(Tag.READY)):
    protocol_version: int
    pid: int
    model: str  # the path the worker loaded
    capabilities: list[Capability]
    max_num_seqs: int  # requests the worker runs at once
    text: TextInfo | None = None  # the chat model's limits, when there is one
    speech: SpeechInfo | None = None  # the TTS model, when there is one
    transcription: TranscriptionInfo | None = None  # the speech-recognition model
    embedding: EmbeddingInfo | None = None  # the embedding model, when there is one
    score: ScoreInfo | None = None  # the model that scores pairs (rerank, score)
    image: ImageInfo | None = None  # the image-generation model, when there is one
    video: VideoInfo | None = None  # the video-generation model, when there is one


class Usage(WireStruct):
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # prompt tokens served from the prefix cache
    reasoning_tokens: int = 0  # completion tokens that went to Delta.reasoning


class ToolCallDelta(WireStruct):
    """A piece of one tool call: id and name come with its first piece, arguments stream."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class Segment(WireStruct):
    """A timed piece of a transcription; `words` as [[word, start, end], ...] when asked.
    The decoding statistics are Whisper's; other models report seek and zeros."""

    id: int
    start: float  # seconds from the start of the audio
    end: float
    text: str
    words: list[list[Any]] = []
    seek: int = 0  # the window's offset in mel frames (100 a second)
    tokens: list[int] = []  # its token ids, timestamps included
    temperature: float = 0.0  # the temperature its window was decoded at
    avg_logprob: float = 0.0
    compression_ratio: float = 0.0
    no_speech_prob: float = 0.0


class TokenLogprob(WireStruct):
    token_id: int
    token: str
    logprob: float
    top: list[list[Any]] = []  # [[token_id, token, logprob], ...]


class ImageOut(WireStruct):
    """One picture of an image request (or a preview of it): RGB, 8 bits, rows top first."""

    index: int  # which of the request's n pictures
    width: int
    height: int
    pixels: bytes  # width * height * 3 bytes
    seed: int  # the seed it was generated with
    partial: int | None = None  # a preview: its number (0, 1, ...); None: the picture


class VideoOut(WireStruct):
    """A video request's clip: H.264 video and AAC sound in an MP4 file, and its first frame."""

    mp4: bytes
    width: int
    height: int
    frames: int
    fps: float
    seed: int  # the seed it was generated with
    first_frame: bytes  # RGB, 8 bits, rows top first: width * height * 3 bytes


class ErrorInfo(WireStruct):
    code: ErrorCode
    message: str
    prompt_tokens: int | None = None  # context_length_exceeded: the prompt's length
    max_prompt_tokens: int | None = None  # and the longest prompt the model takes


class Delta(WireStruct):
    """What one request produced in one worker step."""

    request_id: str
    text: str = ""
    token_ids: list[int] = []
    finish_reason: FinishReason | None = None
    usage: Usage | None = None  # set on the terminal delta
    error: ErrorInfo | None = None  # set when finish_reason == "error"
    reasoning: str = ""  # reasoning ("thinking") text, kept out of `text`
    tool_calls: list[ToolCallDelta] = []
    logprobs: list[TokenLogprob] | None = None  # one per token in token_ids, when asked
    audio: bytes = b""  # PCM frames (little-endian int16 unless the request asked float32)
    sample_rate: int = 0  # of `audio`; 0 when there is none
    segments: list[Segment] = []  # transcription segments
    language: str = ""  # a transcription's (detected) language
    stop_sequence: str = ""  # the stop string that ended the request (finish_reason "stop")
    # Embeddings: one vector per input, in input order, each little-endian float32 bytes
    # (on the terminal delta; OpenAI's base64 encoding is these bytes).
    embeddings: list[bytes] = []
    scores: list[float] = []  # relevance scores, one per document in order (terminal delta)
    images: list[ImageOut] = []  # pictures and previews, as each is done
    video: VideoOut | None = None  # a video request's clip (terminal delta)
    progress: float | None = None  # a video request's fraction done, as it changes
    # A speech request's terminal delta, where its model can go on from it: the phrase's text
    # and codec frames, for the next phrase's SpeechInputs.context (opaque to the gateway).
    speech_context: bytes = b""


class Step(WireStruct, tag=int(Tag.STEP)):
    """All active requests' deltas from one worker iteration."""

    deltas: list[Delta]


class WorkerCounters(WireStruct):
    """The `stats` control call's answer: what the worker is doing and has done."""

    model: str
    pid: int
    active: int  # requests being generated
    waiting: int  # requests received but not started
    active_request_ids: list[str]
    requests_total: int
    requests_aborted: int
    tokens_generated: int
    prompt_tokens: int
    prefix_cache_queries: int
    prefix_cache_hits: int
    prefill_tokens_in_decode_steps: int
    speech_seconds: float
    transcribed_seconds: float
    # speculative decoding (vLLM's spec_decode metrics): proposals made, tokens proposed,
    # tokens accepted, and accepted per position of a proposal
    spec_decode_num_drafts: int = 0
    spec_decode_num_draft_tokens: int = 0
    spec_decode_num_accepted_tokens: int = 0
    spec_decode_num_accepted_tokens_per_pos: list[int] = msgspec.field(default_factory=list)
    image_steps: int = 0  # denoising steps run (image generation)
    image_step_seconds: float = 0.0  # the time they took
    video_steps: int = 0  # denoising steps run (video generation)
    video_step_seconds: float = 0.0  # the time they took
    # Qwen3-TTS's voice cache: prefill tokens looked up, voice-prefix tokens reused, evictions
    voice_cache_queries: int = 0
    voice_cache_hits: int = 0
    voice_cache_evictions: int = 0


class Tokenized(WireStruct):
    """The `tokenize` control call's answer: the ids, and their strings when asked."""

    tokens: list[int]
    token_strs: list[str] | None = None


class ControlReply(WireStruct, tag=int(Tag.CONTROL_REPLY)):
    """The answer to one ControlCall: `ok` with the field of its method (none for shutdown),
    or not, with `error`."""

    call_id: int
    ok: bool
    error: str | None = None
    stats: WorkerCounters | None = None  # stats
    input_tokens: int | None = None  # count_tokens
    tokenized: Tokenized | None = None  # tokenize
    text: str | None = None  # detokenize
    adapters: list[Adapter] | None = None  # load_adapter, unload_adapter: those loaded now


class Heartbeat(WireStruct, tag=int(Tag.HEARTBEAT)):
    time: float
    active: int  # requests being generated
    waiting: int  # requests received but not started


class Fatal(WireStruct, tag=int(Tag.FATAL)):
    """The worker cannot go on (e.g. the model failed to load); it exits after sending."""

    message: str  # short, the kind of failure: the gateway shows it in /health and errors
    detail: str = ""  # the exception and its traceback: the gateway logs it, never shows it


Message = Union[Submit, Abort, ControlCall, Ready, Step, ControlReply, Heartbeat, Fatal]  # noqa: UP007
MESSAGES: tuple[type[WireStruct], ...] = (
    Submit,
    Abort,
    ControlCall,
    Ready,
    Step,
    ControlReply,
    Heartbeat,
    Fatal,
)
