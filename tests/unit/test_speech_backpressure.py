"""Audio for a slow reader: kept in order and never merged away, capped per request; past the
cap the request ends with an error, its audio is dropped and the worker is told to abort."""

from __future__ import annotations

import asyncio

from gateway.workers.admission import Admission
from gateway.workers.open_requests import OpenRequests
from gateway.workers.request_stream import RequestStream
from protocol.messages import Delta, ErrorCode, Step, Usage


def audio(n: int, rid: str = "r") -> Delta:
    return Delta(rid, audio=bytes([n]) * 100, sample_rate=8000)


def drain(stream: RequestStream) -> list[Delta]:
    return asyncio.run(stream.__anext__())


def test_audio_deltas_are_kept_apart_and_in_order():
    stream = RequestStream("r")
    for n in range(3):
        stream.push(audio(n))
    assert [d.audio[0] for d in drain(stream)] == [0, 1, 2]


def test_audio_after_the_accepted_delta_is_not_merged_into_it():
    stream = RequestStream("r")
    stream.push(Delta("r"))
    stream.push(audio(7))
    assert [d.audio for d in drain(stream)] == [b"", bytes([7]) * 100]


def test_audio_within_the_cap_waits_for_its_reader():
    stream = RequestStream("r", max_audio_bytes=300)
    for n in range(3):
        stream.push(audio(n))
    assert not stream.finished


def test_audio_past_the_cap_ends_the_request_with_slow_reader():
    stream = RequestStream("r", max_audio_bytes=250)
    for n in range(3):
        stream.push(audio(n))
    (terminal,) = drain(stream)  # the waiting audio was dropped
    assert terminal.finish_reason == "error" and terminal.error.code == ErrorCode.SLOW_READER


def test_reading_resets_the_count_so_a_steady_reader_is_never_cut_off():
    stream = RequestStream("r", max_audio_bytes=250)
    for n in range(10):
        stream.push(audio(n))
        drain(stream)
    assert not stream.finished


def test_nothing_is_delivered_after_a_cut_off():
    stream = RequestStream("r", max_audio_bytes=150)
    stream.push(audio(1))
    stream.push(audio(2))
    stream.push(Delta("r", finish_reason="stop", usage=Usage(1, 1)))
    assert [d.error.code for d in drain(stream)] == [ErrorCode.SLOW_READER]


def test_a_cut_off_request_is_aborted_at_the_worker_and_frees_its_slot(monkeypatch):
    monkeypatch.setattr("gateway.workers.request_stream.MAX_PENDING_AUDIO_BYTES", 150)

    async def scenario() -> tuple[list[list[str]], int, bool]:
        admission = Admission(capacity=1, max_queue=0)
        admission.open()
        aborts: list[list[str]] = []
        requests = OpenRequests(admission, aborts.append)
        await admission.acquire(1.0)
        requests.add("r")
        requests.on_step(Step([audio(1), audio(2)]))
        return aborts, admission.in_flight, "r" in requests

    aborts, in_flight, still_open = asyncio.run(scenario())
    assert aborts == [["r"]]
    assert in_flight == 0 and not still_open
