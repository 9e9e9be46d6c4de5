"""Merging of pending deltas for a slow reader (RequestStream), the one place deltas are merged:
output is concatenated but never reordered, and a batch holds no two deltas that could have
been one."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.workers.request_stream import MAX_PENDING_IMAGE_BYTES, RequestStream, mergeable
from protocol.messages import Delta, ErrorCode, ImageOut, TokenLogprob, ToolCallDelta, Usage


def pending(*deltas: Delta) -> list[Delta]:
    stream = RequestStream("r")
    for delta in deltas:
        stream.push(delta)
    return asyncio.run(stream.__anext__())


def lp(token: str) -> TokenLogprob:
    return TokenLogprob(1, token, -1.0)


def test_reasoning_then_text_merge_into_one_delta():
    (merged,) = pending(Delta("r", reasoning="a"), Delta("r", reasoning="b"), Delta("r", text="c"))
    assert (merged.reasoning, merged.text) == ("ab", "c")


def test_merged_progress_is_the_latest():
    (merged,) = pending(Delta("r", progress=0.1), Delta("r", progress=0.2), Delta("r"))
    assert merged.progress == 0.2


def test_reasoning_after_text_is_kept_apart_to_preserve_order():
    got = pending(Delta("r", text="a"), Delta("r", reasoning="b"))
    assert [(d.text, d.reasoning) for d in got] == [("a", ""), ("", "b")]


def test_text_after_a_tool_call_is_kept_apart():
    got = pending(Delta("r", tool_calls=[ToolCallDelta(0, "c", "f", "{")]), Delta("r", text="x"))
    assert len(got) == 2


def test_argument_pieces_of_one_call_are_joined():
    (merged,) = pending(
        Delta("r", tool_calls=[ToolCallDelta(0, "c", "f", "{")]),
        Delta("r", tool_calls=[ToolCallDelta(0, None, None, '"a"')]),
        Delta("r", tool_calls=[ToolCallDelta(0, None, None, "}")]),
    )
    assert [(p.id, p.name, p.arguments) for p in merged.tool_calls] == [("c", "f", '{"a"}')]


def test_a_second_call_starts_a_new_piece():
    (merged,) = pending(
        Delta("r", tool_calls=[ToolCallDelta(0, "c0", "f", "{}")]),
        Delta("r", tool_calls=[ToolCallDelta(1, "c1", "g", "{")]),
    )
    assert [p.index for p in merged.tool_calls] == [0, 1]


def test_logprobs_and_token_ids_are_concatenated():
    (merged,) = pending(
        Delta("r", text="a", token_ids=[1], logprobs=[lp("a")]),
        Delta("r", text="b", token_ids=[2], logprobs=[lp("b")]),
    )
    assert merged.token_ids == [1, 2]
    assert [e.token for e in merged.logprobs] == ["a", "b"]


def test_the_terminal_delta_is_never_merged():
    got = pending(Delta("r", text="a"), Delta("r", finish_reason="stop", usage=Usage(1, 1)))
    assert [d.finish_reason for d in got] == [None, "stop"]


def test_pictures_waiting_past_the_cap_end_the_stream_as_a_slow_reader():
    side = 2048
    big = ImageOut(0, side, side, bytes(side * side * 3), 1, partial=0)
    read_in_time = pending(Delta("r", images=[big]), Delta("r", images=[big]))
    assert len(read_in_time[0].images) == 2  # under the cap: merged, kept
    stream = RequestStream("r")
    for _ in range(MAX_PENDING_IMAGE_BYTES // len(big.pixels) + 1):
        stream.push(Delta("r", images=[big]))
    (terminal,) = asyncio.run(stream.__anext__())
    assert terminal.error is not None and terminal.error.code == ErrorCode.SLOW_READER
    assert "pictures" in terminal.error.message and terminal.images == []
    # The terminal delta (the last picture) is never what cuts a stream off.
    stream = RequestStream("r")
    for _ in range(MAX_PENDING_IMAGE_BYTES // len(big.pixels)):
        stream.push(Delta("r", images=[big]))
    stream.push(Delta("r", images=[big], finish_reason="stop", usage=Usage(1, 1)))
    batch = asyncio.run(stream.__anext__())
    assert batch[-1].finish_reason == "stop" and batch[-1].images == [big]


_pieces = st.one_of(
    st.builds(lambda t: Delta("r", text=t, token_ids=[1]), st.sampled_from(["a", "b"])),
    st.builds(lambda t: Delta("r", reasoning=t, token_ids=[2]), st.sampled_from(["x", "y"])),
    st.builds(
        lambda i, name: Delta("r", tool_calls=[ToolCallDelta(i, "c", name, "")]),
        st.integers(0, 1),
        st.sampled_from(["f", None]),
    ),
    st.builds(lambda: Delta("r", tool_calls=[ToolCallDelta(0, None, None, "{}")])),
    st.builds(lambda: Delta("r")),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_pieces, min_size=1, max_size=12))
def test_a_batch_never_holds_two_deltas_that_could_have_been_one(deltas):
    texts, reasonings = [d.text for d in deltas], [d.reasoning for d in deltas]
    batch = pending(*deltas)
    assert not any(mergeable(a, b) for a, b in zip(batch, batch[1:], strict=False))
    assert "".join(d.text for d in batch) == "".join(texts)
    assert "".join(d.reasoning for d in batch) == "".join(reasonings)
