"""Admission queue and request stream on their own: no processes, no sockets."""

from __future__ import annotations

import asyncio

import pytest

from gateway.workers.admission import Admission
from gateway.workers.errors import EngineUnavailable, QueueFull
from gateway.workers.request_stream import RequestStream
from protocol.messages import Delta, Usage
from tests.support.engine_harness import async_test


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@async_test
async def test_open_admission_grants_up_to_capacity_then_queues():
    adm = Admission(capacity=2, max_queue=4)
    adm.open()
    await adm.acquire(1.0)
    await adm.acquire(1.0)
    third = asyncio.create_task(adm.acquire(1.0))
    await _settle()
    assert adm.in_flight == 2 and adm.waiting == 1 and not third.done()
    adm.release()
    await third
    assert adm.in_flight == 2 and adm.waiting == 0


@async_test
async def test_waiters_are_granted_in_arrival_order():
    adm = Admission(capacity=1, max_queue=4)
    adm.open()
    await adm.acquire(1.0)
    order: list[int] = []

    async def wait(n: int) -> None:
        await adm.acquire(2.0)
        order.append(n)

    tasks = [asyncio.create_task(wait(n)) for n in range(3)]
    await _settle()
    for _ in range(3):
        adm.release()
        await _settle()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2]


@async_test
async def test_full_queue_raises_queue_full_with_retry_after():
    adm = Admission(capacity=1, max_queue=1)
    adm.open()
    await adm.acquire(1.0)
    waiter = asyncio.create_task(adm.acquire(1.0))
    await _settle()
    with pytest.raises(QueueFull) as info:
        await adm.acquire(1.0)
    assert info.value.retry_after and info.value.retry_after > 0
    waiter.cancel()


@async_test
async def test_closed_gate_holds_requests_until_opened():
    adm = Admission(capacity=2, max_queue=2)
    task = asyncio.create_task(adm.acquire(2.0))
    await _settle()
    assert not task.done() and adm.in_flight == 0
    adm.open()
    await task
    assert adm.in_flight == 1


@async_test
async def test_waiting_past_the_timeout_raises_unavailable_and_leaves_the_queue():
    adm = Admission(capacity=1, max_queue=2)
    with pytest.raises(EngineUnavailable):
        await adm.acquire(0.05)
    assert adm.waiting == 0 and adm.in_flight == 0


@async_test
async def test_cancelled_waiter_leaves_no_slot_and_no_queue_entry():
    adm = Admission(capacity=1, max_queue=2)
    adm.open()
    await adm.acquire(1.0)
    task = asyncio.create_task(adm.acquire(5.0))
    await _settle()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert adm.waiting == 0
    adm.release()
    assert adm.in_flight == 0


@async_test
async def test_slot_granted_to_a_waiter_cancelled_before_it_ran_is_given_back():
    adm = Admission(capacity=1, max_queue=2)
    adm.open()
    await adm.acquire(1.0)
    task = asyncio.create_task(adm.acquire(5.0))
    await _settle()
    adm.release()  # grants the slot to the waiter ...
    task.cancel()  # ... which is cancelled before it gets to run
    await asyncio.gather(task, return_exceptions=True)
    assert adm.in_flight == 0


@async_test
async def test_fail_waiters_wakes_every_queued_request_with_the_error():
    adm = Admission(capacity=1, max_queue=4)
    tasks = [asyncio.create_task(adm.acquire(5.0)) for _ in range(2)]
    await _settle()
    adm.fail_waiters(EngineUnavailable("model cannot load"))
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, EngineUnavailable) for r in results)
    assert adm.waiting == 0 and adm.in_flight == 0


@async_test
async def test_stream_merges_text_deltas_a_slow_reader_has_not_taken():
    stream = RequestStream("r")
    for n in range(100):
        stream.push(Delta("r", text=f"{n},", token_ids=[n]))
    stream.push(Delta("r", finish_reason="stop", usage=Usage(1, 100)))
    batch = await stream.__anext__()
    assert len(batch) == 2
    assert batch[0].text == "".join(f"{n}," for n in range(100))
    assert batch[0].token_ids == list(range(100))
    assert batch[1].finish_reason == "stop"


@async_test
async def test_stream_ends_after_the_terminal_delta_and_drops_later_ones():
    stream = RequestStream("r")
    stream.push(Delta("r", text="a"))
    stream.push(Delta("r", finish_reason="length", usage=Usage(1, 1)))
    stream.push(Delta("r", finish_reason="error"))
    stream.push(Delta("r", text="late"))
    batches = [batch async for batch in stream]
    assert [[d.finish_reason for d in b] for b in batches] == [[None, "length"]]
