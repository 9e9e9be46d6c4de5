"""Pins the wire protocol: tags, field order, the msgpack layout, and decoding by type."""

from __future__ import annotations

from pathlib import Path

import msgpack
import msgspec
import pytest

from protocol import PROTOCOL_VERSION, ProtocolError, decode, encode
from protocol.inputs import (
    ChatInputs,
    Choice,
    CompleteInputs,
    EmbedInputs,
    Grammar,
    ImageInputs,
    JsonObject,
    JsonSchema,
    Op,
    Regex,
    SamplingParams,
    ScoreInputs,
    SpeechInputs,
    TranscribeInputs,
    VideoInputs,
)
from protocol.messages import (
    MESSAGES,
    Abort,
    AdapterArgs,
    ControlCall,
    ControlMethod,
    ControlReply,
    Delta,
    DetokenizeArgs,
    ErrorCode,
    ErrorInfo,
    Fatal,
    FinishReason,
    Heartbeat,
    ImageOut,
    Ready,
    Segment,
    Step,
    Submit,
    Tag,
    TokenizeArgs,
    Tokenized,
    TokenLogprob,
    ToolCallDelta,
    Usage,
    VideoOut,
    WorkerCounters,
)
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
    Voice,
)

# Changing any of these is a protocol change: bump PROTOCOL_VERSION with it.
PINNED_FIELDS = {
    Submit: (
        "request_id", "inputs", "stream", "deadline", "http_request_id", "time_limit", "adapter",
    ),
    Abort: ("request_ids",),
    ControlCall: ("call_id", "method", "chat", "tokenize", "detokenize", "adapter"),
    AdapterArgs: ("name", "path", "replace"),
    Adapter: ("name", "path"),
    TokenizeArgs: (
        "prompt", "chat", "add_special_tokens", "add_generation_prompt",
        "continue_final_message", "return_token_strs",
    ),
    DetokenizeArgs: ("tokens",),
    Ready: (
        "protocol_version", "pid", "model", "capabilities", "max_num_seqs", "text", "speech",
        "transcription", "embedding", "score", "image", "video",
    ),
    Step: ("deltas",),
    ControlReply: (
        "call_id", "ok", "error", "stats", "input_tokens", "tokenized", "text", "adapters",
    ),
    WorkerCounters: (
        "model", "pid", "active", "waiting", "active_request_ids", "requests_total",
        "requests_aborted", "tokens_generated", "prompt_tokens", "prefix_cache_queries",
        "prefix_cache_hits", "prefill_tokens_in_decode_steps", "speech_seconds",
        "transcribed_seconds", "spec_decode_num_drafts", "spec_decode_num_draft_tokens",
        "spec_decode_num_accepted_tokens", "spec_decode_num_accepted_tokens_per_pos",
        "image_steps", "image_step_seconds", "video_steps", "video_step_seconds",
        "voice_cache_queries", "voice_cache_hits", "voice_cache_evictions",
    ),
    Tokenized: ("tokens", "token_strs"),
    Heartbeat: ("time", "active", "waiting"),
    Fatal: ("message", "detail"),
    SamplingParams: (
        "max_tokens", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
        "presence_penalty", "frequency_penalty", "seed", "logit_bias", "stop", "logprobs",
        "constraint",
    ),
    JsonObject: (),
    JsonSchema: ("schema", "name", "strict", "field"),
    Regex: ("pattern", "field"),
    Choice: ("options", "field"),
    Grammar: ("lark", "field"),
    ChatInputs: (
        "messages", "sampling", "chat_template_kwargs", "tools", "tool_choice",
        "parallel_tool_calls", "thinking_budget", "images", "audios", "videos", "talker_speaker",
    ),
    CompleteInputs: ("prompt", "sampling"),
    SpeechInputs: (
        "input", "voice", "instructions", "language", "speed", "seed", "ref_audio", "ref_text",
        "sample_format", "context",
    ),
    TranscribeInputs: (
        "audio", "filename", "language", "prompt", "temperature", "task", "timestamps",
    ),
    EmbedInputs: ("input", "dimensions", "truncate"),
    ScoreInputs: ("queries", "documents", "truncate"),
    ImageInputs: (
        "prompt", "width", "height", "n", "steps", "guidance", "seed", "image", "partial_images",
    ),
    ImageInfo: (
        "model_path", "family", "default_steps", "default_guidance", "min_steps", "max_steps",
        "min_side", "max_side", "side_multiple", "edit", "previews", "max_guidance",
        "default_edit_steps",
    ),
    ImageOut: ("index", "width", "height", "pixels", "seed", "partial"),
    VideoInputs: ("prompt", "width", "height", "seconds", "steps", "seed"),
    VideoInfo: (
        "model_path", "family", "default_steps", "min_steps", "max_steps", "default_width",
        "default_height", "side_multiple", "max_pixels", "max_aspect", "min_seconds",
        "max_seconds", "fps", "max_prompt_tokens",
    ),
    VideoOut: ("mp4", "width", "height", "frames", "fps", "seed", "first_frame"),
    TextInfo: ("max_context", "batching", "talker_speakers", "adapters"),
    Voice: ("name", "language"),
    SpeechInfo: (
        "model", "model_path", "family", "voices", "cloning", "ref_text", "descriptions",
        "instructions", "languages", "speed", "streaming", "sample_rate",
    ),
    TranscriptionInfo: ("model_path", "family", "sample_rate", "word_timestamps"),
    EmbeddingInfo: (
        "model_path", "backend", "model_type", "dimensions", "pooling", "normalize",
        "max_input_tokens", "max_inputs", "max_total_tokens", "matryoshka",
        "matryoshka_dimensions",
    ),
    ScoreInfo: (
        "model_path", "method", "model_type", "max_input_tokens", "max_documents",
        "max_total_tokens",
    ),
    Delta: (
        "request_id", "text", "token_ids", "finish_reason", "usage", "error", "reasoning",
        "tool_calls", "logprobs", "audio", "sample_rate", "segments", "language",
        "stop_sequence", "embeddings", "scores", "images", "video", "progress",
        "speech_context",
    ),
    Segment: (
        "id", "start", "end", "text", "words", "seek", "tokens", "temperature", "avg_logprob",
        "compression_ratio", "no_speech_prob",
    ),
    Usage: ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens"),
    ToolCallDelta: ("index", "id", "name", "arguments"),
    TokenLogprob: ("token_id", "token", "logprob", "top"),
    ErrorInfo: ("code", "message", "prompt_tokens", "max_prompt_tokens"),
}  # fmt: skip

PINNED_TAGS = {
    Submit: 1, Abort: 2, ControlCall: 3,
    Ready: 16, Step: 17, ControlReply: 18, Heartbeat: 19, Fatal: 20,
    ChatInputs: "chat", CompleteInputs: "complete", SpeechInputs: "speech",
    TranscribeInputs: "transcribe", EmbedInputs: "embed", ScoreInputs: "score",
    ImageInputs: "image", VideoInputs: "video",
    JsonObject: "json_object", JsonSchema: "json_schema", Regex: "regex", Choice: "choice",
    Grammar: "grammar",
}  # fmt: skip

PINNED_VALUES = {
    Op: ["chat", "complete", "speech", "transcribe", "embed", "score", "image", "video"],
    FinishReason: ["stop", "tool_calls", "length", "abort", "error"],
    ErrorCode: ["bad_request", "internal", "worker_died", "model_swap", "deadline", "slow_reader",
                "context_length_exceeded"],
    ControlMethod: [
        "stats", "shutdown", "count_tokens", "tokenize", "detokenize", "load_adapter",
        "unload_adapter",
    ],
    Capability: [
        "chat", "complete", "image_in", "audio_in", "video_in", "speech", "transcribe", "translate",
        "embed", "rerank", "score", "image_out", "image_edit", "video_out",
    ],
}  # fmt: skip


def test_protocol_version_is_pinned():
    assert PROTOCOL_VERSION == 20


@pytest.mark.parametrize("cls", list(PINNED_FIELDS), ids=lambda c: c.__name__)
def test_field_order_is_pinned(cls):
    assert cls.__struct_fields__ == PINNED_FIELDS[cls]


@pytest.mark.parametrize("cls", list(PINNED_FIELDS), ids=lambda c: c.__name__)
def test_every_structure_is_a_positional_array(cls):
    assert cls.__struct_config__.array_like


def test_tags_are_pinned_and_unique():
    assert {cls: cls.__struct_config__.tag for cls in PINNED_TAGS} == PINNED_TAGS
    assert {cls: cls.__struct_config__.tag for cls in MESSAGES} == {
        cls: int(Tag[cls.__name__.upper().replace("CONTROLCALL", "CONTROL_CALL")])
        if cls is not ControlReply
        else int(Tag.CONTROL_REPLY)
        for cls in MESSAGES
    }
    assert len(set(Tag)) == len(Tag)


@pytest.mark.parametrize("enum", list(PINNED_VALUES), ids=lambda e: e.__name__)
def test_enum_values_are_pinned(enum):
    assert [m.value for m in enum] == PINNED_VALUES[enum]


def test_submit_wire_layout_is_a_positional_array_led_by_its_inputs_tag():
    sub = Submit(
        request_id="r1",
        inputs=ChatInputs(
            messages=[{"role": "user", "content": "hi"}],
            sampling=SamplingParams(max_tokens=8, temperature=0.0, logit_bias={5: -1.5}),
        ),
        stream=True,
        http_request_id="req_1",
    )
    raw = msgpack.unpackb(encode(sub), strict_map_key=False)
    sampling = [8, 0.0, None, None, None, None, None, None, None, {5: -1.5}, [], None, None]
    messages = [{"role": "user", "content": "hi"}]
    assert raw == [
        1,
        "r1",
        ["chat", messages, sampling, {}, [], None, None, None, [], [], [], None],
        True,
        None,
        "req_1",
        None,
        None,
    ]


def test_tokenizer_control_calls_carry_their_arguments_after_the_chat():
    call = ControlCall(9, ControlMethod.TOKENIZE, tokenize=TokenizeArgs("hi", None, False))
    assert msgpack.unpackb(encode(call)) == [
        3, 9, "tokenize", None, ["hi", None, False, True, False, False], None, None,
    ]  # fmt: skip
    call = ControlCall(9, ControlMethod.DETOKENIZE, detokenize=DetokenizeArgs([5, 6]))
    assert msgpack.unpackb(encode(call)) == [3, 9, "detokenize", None, None, [[5, 6]], None]


def test_adapter_control_calls_carry_the_adapter_last():
    call = ControlCall(4, ControlMethod.LOAD_ADAPTER, adapter=AdapterArgs("sql", "/a/sql"))
    raw = [3, 4, "load_adapter", None, None, None, ["sql", "/a/sql", False]]
    assert msgpack.unpackb(encode(call)) == raw
    reply = ControlReply(4, True, adapters=[Adapter("sql", "/a/sql")])
    assert decode(encode(reply)) == reply


def test_a_constraint_travels_as_its_tagged_array():
    sampling = SamplingParams(4, constraint=JsonSchema({"type": "object"}, "x", True))
    raw = msgpack.unpackb(encode(Submit("r", CompleteInputs("a", sampling), False)))
    assert raw[2][2][-1] == ["json_schema", {"type": "object"}, "x", True, None]
    sampling = SamplingParams(4, constraint=Choice(["a", "b"], "guided_choice"))
    raw = msgpack.unpackb(encode(Submit("r", CompleteInputs("a", sampling), False)))
    assert raw[2][2][-1] == ["choice", ["a", "b"], "guided_choice"]


def test_step_wire_layout_nests_deltas_usage_and_error():
    step = Step(
        deltas=[
            Delta("a", "he", [7, 8]),
            Delta("b", "", [], FinishReason.ERROR, Usage(3, 0), ErrorInfo("bad_request", "long")),
        ]
    )
    raw = msgpack.unpackb(encode(step))
    assert raw == [
        17,
        [
            ["a", "he", [7, 8], None, None, None, "", [], None, b"", 0, [], "", "", [], [], [],
             None, None, b""],
            ["b", "", [], "error", [3, 0, 0, 0], ["bad_request", "long", None, None], "", [],
                 None, b"", 0,
             [], "", "", [], [], [], None, None, b""],
        ],
    ]  # fmt: skip


def test_delta_wire_layout_nests_tool_calls_and_logprobs():
    delta = Delta(
        "c",
        "",
        [9],
        reasoning="hm",
        tool_calls=[ToolCallDelta(0, "call_1", "get", '{"a"')],
        logprobs=[TokenLogprob(9, "x", -0.5, [[9, "x", -0.5], [3, "y", -1.0]])],
    )
    raw = msgpack.unpackb(encode(Step([delta])))
    assert raw[1][0][6:9] == [
        "hm",
        [[0, "call_1", "get", '{"a"']],
        [[9, "x", -0.5, [[9, "x", -0.5], [3, "y", -1.0]]]],
    ]


def test_ready_keeps_its_version_and_pid_first():
    raw = msgpack.unpackb(encode(Ready(PROTOCOL_VERSION, 4321, "/m", [Capability.CHAT], 8)))
    assert raw[:3] == [16, PROTOCOL_VERSION, 4321]


def test_decoding_gives_enums_and_structures_not_strings_and_lists():
    frame = encode(Step([Delta("a", finish_reason=FinishReason.STOP, usage=Usage(1, 2))]))
    [delta] = decode(frame).deltas
    assert delta.finish_reason is FinishReason.STOP and isinstance(delta.usage, Usage)
    submit = decode(encode(Submit("r", SpeechInputs("hi", seed=3), False)))
    assert isinstance(submit.inputs, SpeechInputs) and submit.op is Op.SPEECH


SPEECH = SpeechInfo(
    "tts", "/tts", "qwen3_tts", [Voice("aiden", "english")], True, True, False, True,
    ["auto"], False, True, 24000,
)  # fmt: skip

EMBEDDING = EmbeddingInfo(
    "/e", "mlx-embeddings", "bert", 384, "mean", True, 256, 2048, 300000, True, [128, 256],
)  # fmt: skip


@pytest.mark.parametrize(
    "message",
    [
        Submit("r", CompleteInputs([1, 2, 3], SamplingParams(4, seed=7)), False, 12.5),
        Submit(
            "s",
            ChatInputs(
                [{"role": "user", "content": [{"type": "image"}]}],
                SamplingParams(4, logprobs=2, constraint=JsonObject()),
                tools=[{"type": "function", "function": {"name": "f"}}],
                tool_choice={"type": "function", "function": {"name": "f"}},
                thinking_budget=10,
                images=[b"\x89PNG"],
            ),
            True,
        ),
        Submit("t", SpeechInputs("hi", voice="aiden", ref_audio=b"RIFF", seed=1), True),
        Submit("u", TranscribeInputs(b"RIFF", "a.wav", "en", timestamps=["word"]), False),
        Submit("v", EmbedInputs(["a", [1, 2]]), False),
        Submit("w", EmbedInputs(["a"], dimensions=8, truncate=-1), False),
        Submit("x", ScoreInputs(["q"], ["a", "b"], truncate=16), False),
        Abort(["a", "b"]),
        ControlCall(3, ControlMethod.STATS),
        ControlCall(4, ControlMethod.COUNT_TOKENS, ChatInputs([], SamplingParams(1))),
        ControlCall(5, ControlMethod.TOKENIZE, tokenize=TokenizeArgs("hi", return_token_strs=True)),
        ControlCall(
            6,
            ControlMethod.TOKENIZE,
            tokenize=TokenizeArgs(
                chat=ChatInputs([{"role": "user", "content": "hi"}], SamplingParams(1)),
                add_special_tokens=False,
                add_generation_prompt=False,
                continue_final_message=True,
            ),
        ),
        ControlCall(7, ControlMethod.DETOKENIZE, detokenize=DetokenizeArgs([1, 2, 3])),
        Ready(PROTOCOL_VERSION, 1234, "/m", [Capability.CHAT], 8, TextInfo(4096, "continuous")),
        Ready(PROTOCOL_VERSION, 7, "/tts", [Capability.SPEECH], 1, speech=SPEECH),
        Ready(
            PROTOCOL_VERSION,
            7,
            "/w",
            [Capability.TRANSCRIBE],
            1,
            transcription=TranscriptionInfo("/w", "whisper", 16000, True),
        ),  # fmt: skip
        Ready(PROTOCOL_VERSION, 7, "/e", [Capability.EMBED], 8, None, embedding=EMBEDDING),
        Step([Delta("a", "x", [1], FinishReason.LENGTH, Usage(2, 1, cached_tokens=1))]),
        Step([Delta("e", finish_reason=FinishReason.STOP, embeddings=[b"\0\0\x80?"] * 2)]),
        Ready(
            PROTOCOL_VERSION,
            7,
            "/r",
            [Capability.RERANK, Capability.SCORE],
            8,
            score=ScoreInfo("/r", "cross-encoder", "bert", 512, 2048, 300000),
        ),
        Step([Delta("x", finish_reason=FinishReason.STOP, scores=[0.25, -1.5])]),
        Step(
            [
                Delta("t", audio=b"\x00\x01" * 4, sample_rate=24000),
                Delta(
                    "s",
                    "hi",
                    segments=[Segment(0, 0.0, 1.5, "hi", [["hi", 0.1, 0.4]], tokens=[5])],
                    language="en",
                ),
            ]
        ),
        ControlReply(
            3, True, stats=WorkerCounters("m", 1, 0, 0, [], 2, 0, 9, 5, 0, 0, 0, 0.0, 1.5)
        ),
        ControlReply(4, False, "no such method"),
        ControlReply(5, True, tokenized=Tokenized([1, 2], ["a", "b"])),
        ControlReply(6, True, input_tokens=12),
        ControlReply(7, True, text="hi"),
        Heartbeat(1.5, 2, 0),
        Fatal("cannot load", "Traceback ..."),
    ],
    ids=lambda m: type(m).__name__,
)
def test_every_message_round_trips(message):
    assert decode(encode(message)) == message


@pytest.mark.parametrize(
    "frame",
    [
        b"\xc1",  # never valid msgpack
        msgpack.packb({"not": "an array"}),
        msgpack.packb([]),
        msgpack.packb([99, "x"]),  # unknown tag
        msgpack.packb([[1], "x"]),  # a tag that is not one
        msgpack.packb([2]),  # Abort without its field
        msgpack.packb([2, "not a list"]),
        msgpack.packb([17, [["a", 5]]]),  # a Delta whose text is a number
        msgpack.packb([17, [["a", "x", [], "done"]]]),  # a finish reason that is none
        msgpack.packb([1, "r", ["sing", "x"], True, None]),  # an operation that is none
        msgpack.packb([1, 5, ["complete", "a", [4]], True, None]),  # a request id not a string
        msgpack.packb([1, "r", ["complete", "a", [4]], True, "soon"]),  # a deadline not a number
        msgpack.packb([3, 1, "reboot", None]),  # a control method that is none
        msgpack.packb([19, 1.0, 1, 0, "extra"]),  # more fields than the message has
    ],
)
def test_invalid_frames_raise_protocol_error(frame):
    with pytest.raises(ProtocolError):
        decode(frame)


def test_missing_trailing_fields_take_their_defaults():
    # Positional arrays may end early: fields after the required ones have defaults.
    delta = decode(msgpack.packb([17, [["a", "x"]]])).deltas[0]
    assert (delta.text, delta.token_ids, delta.finish_reason) == ("x", [], None)


def test_the_codec_only_uses_types_it_can_encode():
    # Every field type of every structure is something msgspec converts on its own.
    for cls in PINNED_FIELDS:
        msgspec.inspect.type_info(cls)


def test_the_architecture_document_states_the_protocol_version_of_the_code():
    text = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    assert f"`PROTOCOL_VERSION` (now {PROTOCOL_VERSION})" in text
