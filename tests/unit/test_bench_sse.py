"""The benchmark client's incremental server-sent-events parser (gateway.cli.bench.sse)."""

from __future__ import annotations

from gateway.cli.bench.sse import SSEParser


def test_event_split_across_reads_is_returned_once_complete():
    parser = SSEParser()
    assert parser.feed(b'data: {"a"') == []
    assert parser.feed(b":1}\n") == []
    assert parser.feed(b"\n") == ['{"a":1}']


def test_several_events_in_one_read_are_all_returned_in_order():
    assert SSEParser().feed(b"data: one\n\ndata: two\n\ndata: [DONE]\n\n") == [
        "one",
        "two",
        "[DONE]",
    ]


def test_crlf_line_endings_are_accepted():
    assert SSEParser().feed(b"data: x\r\n\r\n") == ["x"]


def test_comments_and_other_fields_are_skipped():
    parser = SSEParser()
    assert parser.feed(b": keep-alive\n\nevent: message\nid: 3\ndata: y\n\n") == ["y"]


def test_multi_line_data_is_joined_with_newlines():
    assert SSEParser().feed(b"data: a\ndata: b\n\n") == ["a\nb"]


def test_only_one_space_after_the_colon_is_framing():
    assert SSEParser().feed(b"data:x\n\ndata:  y\n\n") == ["x", " y"]


def test_close_returns_a_last_event_without_its_blank_line():
    parser = SSEParser()
    parser.feed(b"data: last")
    assert parser.close() == ["last"]
    assert parser.close() == []
