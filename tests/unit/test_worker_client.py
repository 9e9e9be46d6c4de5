"""The gateway's receiving end (gateway/workers/worker_channel.py): every frame is handled, in order,
in a burst longer than one drain or one at a time; a frame that is not a message is dropped
and the next one still arrives; a ControlReply resolves its call; a client never closed is
collected without hanging."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import zmq

from gateway.workers import worker_channel as worker_client
from gateway.workers.worker_channel import WorkerClient
from protocol import Endpoints, decode, encode
from protocol.messages import ControlReply, Heartbeat, Message
from tests.support.engine_harness import async_test, wait_until


def _worker_socket(endpoints: Endpoints) -> tuple[zmq.Context, zmq.Socket]:
    """A worker's PUSH socket, connected to the gateway's PULL address."""
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    push.connect(endpoints.from_worker)
    return ctx, push


@async_test
async def test_bursts_longer_than_one_drain_arrive_whole_and_in_order(tmp_path):
    received: list[Message] = []
    endpoints = Endpoints.ipc_in(str(tmp_path))
    client = WorkerClient(endpoints, received.append)
    ctx, push = _worker_socket(endpoints)
    try:
        client.bind()
        for i in range(3):  # one at a time
            push.send(encode(Heartbeat(time=float(i), active=0, waiting=0)))
            await wait_until(lambda i=i: len(received) == i + 1)
        burst = 3 * worker_client.DRAIN_BURST + 5
        for i in range(3, 3 + burst):
            push.send(encode(Heartbeat(time=float(i), active=0, waiting=0)))
        await wait_until(lambda: len(received) == 3 + burst)
        push.send(b"not msgpack at all")
        push.send(encode(Heartbeat(time=-1.0, active=0, waiting=0)))
        await wait_until(lambda: len(received) == 4 + burst)
    finally:
        await client.close()
        push.close()
        ctx.term()
    assert [m.time for m in received] == [float(i) for i in range(3 + burst)] + [-1.0]


@async_test
async def test_a_control_reply_resolves_its_call(tmp_path):
    endpoints = Endpoints.ipc_in(str(tmp_path))
    client = WorkerClient(endpoints, lambda message: None)
    client.bind()
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)  # the worker's end of the gateway's PUSH socket
    pull.connect(endpoints.to_worker)
    push = ctx.socket(zmq.PUSH)
    push.connect(endpoints.from_worker)
    loop = asyncio.get_running_loop()

    def answer() -> None:
        call = decode(pull.recv())
        push.send(encode(ControlReply(call_id=call.call_id, ok=True, input_tokens=7)))

    try:
        answering = loop.run_in_executor(None, answer)
        reply = await client.call("stats", timeout=10.0)
        assert reply.ok and reply.input_tokens == 7
        await answering
    finally:
        await client.close()
        for sock in (pull, push):
            sock.close(linger=0)
        ctx.term()


def test_a_client_never_closed_is_collected_without_hanging(tmp_path):
    """Left in a garbage cycle (a test that never stopped its engine), a client with a
    context of its own would hang the collector in that context's term()."""
    code = textwrap.dedent(f"""
        import gc
        from gateway.workers.worker_channel import WorkerClient
        from protocol import Endpoints
        client = WorkerClient(Endpoints.ipc_in({str(tmp_path)!r}), lambda message: None)
        client.cycle = client
        del client
        gc.collect()
        print("collected")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "collected", done.stderr
