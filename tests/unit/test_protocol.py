"""Pins the wire protocol: tags, field order and the msgpack layout of every message."""

from __future__ import annotations

from dataclasses import fields

import msgpack
import pytest

from protocol import PROTOCOL_VERSION, ProtocolError, decode, encode
from protocol.messages import (
    MESSAGE_TAGS,
    Abort,
    ControlCall,
    ControlReply,
    Delta,
    ErrorInfo,
    Fatal,
    Heartbeat,
    Ready,
    SamplingParams,
    Segment,
    Step,
    Submit,
    Tag,
    TokenLogprob,
    ToolCallDelta,
    Usage,
)

# Changing any of these is a protocol change: bump PROTOCOL_VERSION with it.
PINNED_FIELDS = {
    Submit: ("request_id", "op", "inputs", "sampling", "stream", "deadline"),
    Abort: ("request_ids",),
    ControlCall: ("call_id", "method", "args"),
    Ready: ("protocol_version", "model", "capabilities", "limits", "pid", "audio"),
    Step: ("deltas",),
    ControlReply: ("call_id", "ok", "result", "error"),
    Heartbeat: ("time", "active", "waiting"),
    Fatal: ("message", "detail"),
    SamplingParams: (
        "max_tokens", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
        "presence_penalty", "frequency_penalty", "seed", "logit_bias", "stop", "logprobs",
        "constraint",
    ),
    Delta: (
        "request_id", "text", "token_ids", "finish_reason", "usage", "error", "reasoning",
        "tool_calls", "logprobs", "audio", "sample_rate", "segments", "language",
        "stop_sequence",
    ),
    Segment: (
        "id", "start", "end", "text", "words", "seek", "tokens", "temperature", "avg_logprob",
        "compression_ratio", "no_speech_prob",
    ),
    Usage: ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens"),
    ToolCallDelta: ("index", "id", "name", "arguments"),
    TokenLogprob: ("token_id", "token", "logprob", "top"),
    ErrorInfo: ("code", "message"),
}  # fmt: skip

PINNED_TAGS = {
    Submit: 1, Abort: 2, ControlCall: 3,
    Ready: 16, Step: 17, ControlReply: 18, Heartbeat: 19, Fatal: 20,
}  # fmt: skip


def test_protocol_version_is_pinned():
    assert PROTOCOL_VERSION == 5


@pytest.mark.parametrize("cls", list(PINNED_FIELDS), ids=lambda c: c.__name__)
def test_field_order_is_pinned(cls):
    assert tuple(f.name for f in fields(cls)) == PINNED_FIELDS[cls]


def test_tags_are_pinned_and_unique():
    assert {cls: int(tag) for cls, tag in MESSAGE_TAGS.items()} == PINNED_TAGS
    assert len(set(Tag)) == len(Tag)


def test_submit_wire_layout_is_a_positional_array():
    sub = Submit(
        request_id="r1",
        op="chat",
        inputs={"messages": [{"role": "user", "content": "hi"}]},
        sampling=SamplingParams(max_tokens=8, temperature=0.0, logit_bias={5: -1.5}, stop=["x"]),
        stream=True,
        deadline=None,
    )
    raw = msgpack.unpackb(encode(sub), strict_map_key=False)
    assert raw == [
        1,
        "r1",
        "chat",
        {"messages": [{"role": "user", "content": "hi"}]},
        [8, 0.0, None, None, None, None, None, None, None, {5: -1.5}, ["x"], None, None],
        True,
        None,
    ]


def test_step_wire_layout_nests_deltas_usage_and_error():
    step = Step(
        deltas=[
            Delta("a", "he", [7, 8]),
            Delta("b", "", [], "error", Usage(3, 0), ErrorInfo("bad_request", "too long")),
        ]
    )
    raw = msgpack.unpackb(encode(step))
    assert raw == [
        17,
        [
            ["a", "he", [7, 8], None, None, None, "", [], None, b"", 0, [], "", ""],
            [
                "b",
                "",
                [],
                "error",
                [3, 0, 0, 0],
                ["bad_request", "too long"],
                "",
                [],
                None,
                b"",
                0,
                [],
                "",
                "",
            ],
        ],
    ]


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
    assert decode(encode(Step([delta]))) == Step([delta])


@pytest.mark.parametrize(
    "message",
    [
        Submit("r", "complete", {"prompt": [1, 2, 3]}, SamplingParams(4, seed=7), False, 12.5),
        Abort(["a", "b"]),
        ControlCall(3, "stats"),
        Ready(PROTOCOL_VERSION, "/m", ["chat", "complete"], {"max_context": 4096}, 1234),
        Step([Delta("a", "x", [1], "length", Usage(2, 1, cached_tokens=1))]),
        Submit(
            "s",
            "chat",
            {"messages": [], "tools": [{"type": "function"}]},
            SamplingParams(4, logprobs=2, constraint={"type": "json_object"}),
            True,
        ),
        ControlReply(3, True, {"active": 0}),
        ControlReply(4, False, None, "no such method"),
        Heartbeat(1.5, 2, 0),
        Ready(3, "/tts", ["speech"], {}, 7, {"voices": [{"name": "aiden"}], "sample_rate": 24000}),
        Step(
            [
                Delta("t", audio=b"\x00\x01" * 4, sample_rate=24000),
                Delta(
                    "s",
                    "hi",
                    segments=[Segment(0, 0.0, 1.5, "hi", [["hi", 0.1, 0.4]])],
                    language="en",
                ),
            ]
        ),
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
        msgpack.packb([2]),  # Abort without its field
        msgpack.packb([17, [["a", "x"]]]),  # a Delta with too few fields
    ],
)
def test_invalid_frames_raise_protocol_error(frame):
    with pytest.raises(ProtocolError):
        decode(frame)
