"""Every message that crosses the gateway <-> worker socket pair, in one screen.

Schema only: dataclasses, their wire tags and the protocol version. Encoding lives in
`protocol.codec`. On the wire a message is a msgpack array `[tag, field1, field2, ...]`
with fields in declaration order; nested messages (SamplingParams, Delta, Usage,
ErrorInfo) are arrays of their fields too. Changing a tag, a field or the field order
is a protocol change: bump PROTOCOL_VERSION and update tests/unit/test_protocol.py.

Direction: gateway -> worker: Submit, Abort, ControlCall.
           worker -> gateway: Ready, Step, ControlReply, Heartbeat, Fatal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

PROTOCOL_VERSION = 5


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


class Op:
    """Operations a Submit can ask for."""

    CHAT = "chat"  # inputs: {"messages": [...], "chat_template_kwargs": {...}}
    COMPLETE = "complete"  # inputs: {"prompt": str | list[int]}
    SPEECH = "speech"  # text -> PCM; inputs: {"input", "voice", "instructions", ...}
    TRANSCRIBE = "transcribe"  # audio -> text; inputs: {"audio": bytes, "language", ...}


class FinishReason:
    """Terminal reasons. Every submitted request gets exactly one terminal Delta."""

    STOP = "stop"  # EOS or a stop string
    TOOL_CALLS = "tool_calls"  # the model called tools (Delta.tool_calls)
    LENGTH = "length"  # max_tokens or the context window
    ABORT = "abort"  # aborted by the gateway (client gone, swap, shutdown)
    ERROR = "error"  # request-scoped failure; Delta.error says why


class ErrorCode:
    """Machine-readable error codes carried by ErrorInfo.code."""

    BAD_REQUEST = "bad_request"  # the input cannot be served (maps to HTTP 400)
    INTERNAL = "internal"  # a bug or an MLX failure inside one request (HTTP 500)
    WORKER_DIED = "worker_died"  # made by the gateway when the worker process is gone
    SWAP = "model_swap"  # drained past the timeout during a model swap
    DEADLINE = "deadline"  # the Submit deadline passed


@dataclass(slots=True)
class SamplingParams:
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
    stop: list[str] = field(default_factory=list)
    logprobs: int | None = None  # None: off; k >= 0: the chosen token's logprob + top k others
    # Constrained decoding: {"type": "json_object"} | {"type": "json_schema", "schema": {...}}
    # | {"type": "tool_call", "required": bool, "name": str | None}; None: unconstrained.
    constraint: dict[str, Any] | None = None


@dataclass(slots=True)
class Submit:
    request_id: str
    op: str
    inputs: dict[str, Any]
    sampling: SamplingParams
    stream: bool
    deadline: float | None = None  # time.time() after which the worker aborts it


@dataclass(slots=True)
class Abort:
    request_ids: list[str]


@dataclass(slots=True)
class ControlCall:
    call_id: int
    method: str  # "stats" | "shutdown"
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Ready:
    protocol_version: int
    model: str  # the path the worker loaded
    capabilities: list[str]  # e.g. ["chat", "complete"]
    limits: dict[str, Any]  # e.g. {"max_context": 32768, "max_num_seqs": 8}
    pid: int
    # Speech out: [{"name": str, "language": str | None, ...}] plus what the TTS model can do,
    # e.g. {"voices": [...], "cloning": bool, "descriptions": bool, "sample_rate": 24000}.
    audio: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # prompt tokens served from the prefix cache
    reasoning_tokens: int = 0  # completion tokens that went to Delta.reasoning


@dataclass(slots=True)
class ToolCallDelta:
    """A piece of one tool call: id and name come with its first piece, arguments stream."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(slots=True)
class Segment:
    """A timed piece of a transcription; `words` as [[word, start, end], ...] when asked.
    The decoding statistics are Whisper's; other models report seek and zeros."""

    id: int
    start: float  # seconds from the start of the audio
    end: float
    text: str
    words: list[list[Any]] = field(default_factory=list)
    seek: int = 0  # the window's offset in mel frames (100 a second)
    tokens: list[int] = field(default_factory=list)  # its token ids, timestamps included
    temperature: float = 0.0  # the temperature its window was decoded at
    avg_logprob: float = 0.0
    compression_ratio: float = 0.0
    no_speech_prob: float = 0.0


@dataclass(slots=True)
class TokenLogprob:
    token_id: int
    token: str
    logprob: float
    top: list[list[Any]] = field(default_factory=list)  # [[token_id, token, logprob], ...]


@dataclass(slots=True)
class ErrorInfo:
    code: str
    message: str


@dataclass(slots=True)
class Delta:
    """What one request produced in one worker step."""

    request_id: str
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None  # set on the terminal delta
    error: ErrorInfo | None = None  # set when finish_reason == "error"
    reasoning: str = ""  # reasoning ("thinking") text, kept out of `text`
    tool_calls: list[ToolCallDelta] = field(default_factory=list)
    logprobs: list[TokenLogprob] | None = None  # one per token in token_ids, when asked
    audio: bytes = b""  # PCM frames (little-endian int16 unless the request asked float32)
    sample_rate: int = 0  # of `audio`; 0 when there is none
    segments: list[Segment] = field(default_factory=list)  # transcription segments
    language: str = ""  # a transcription's (detected) language
    stop_sequence: str = ""  # the stop string that ended the request (finish_reason "stop")


@dataclass(slots=True)
class Step:
    """All active requests' deltas from one worker iteration."""

    deltas: list[Delta]


@dataclass(slots=True)
class ControlReply:
    call_id: int
    ok: bool
    result: dict[str, Any] | None = None
    error: str | None = None


@dataclass(slots=True)
class Heartbeat:
    time: float
    active: int  # requests being generated
    waiting: int  # requests received but not started


@dataclass(slots=True)
class Fatal:
    """The worker cannot go on (e.g. the model failed to load); it exits after sending."""

    message: str  # short, the kind of failure: the gateway shows it in /health and errors
    detail: str = ""  # the exception and its traceback: the gateway logs it, never shows it


MESSAGE_TAGS: dict[type, Tag] = {
    Submit: Tag.SUBMIT,
    Abort: Tag.ABORT,
    ControlCall: Tag.CONTROL_CALL,
    Ready: Tag.READY,
    Step: Tag.STEP,
    ControlReply: Tag.CONTROL_REPLY,
    Heartbeat: Tag.HEARTBEAT,
    Fatal: Tag.FATAL,
}

Message = Submit | Abort | ControlCall | Ready | Step | ControlReply | Heartbeat | Fatal
