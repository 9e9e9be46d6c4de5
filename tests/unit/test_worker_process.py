"""The real worker process (`python -m worker`) against sockets the test binds, tiny checkpoint.

Greedy output is checked token for token against `mlx_lm.stream_generate` run in this process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import mlx.core as mx
import msgpack
import pytest
import zmq
from mlx_lm.generate import generate_step
from mlx_lm.sample_utils import make_sampler

from protocol import Endpoints, decode, encode
from protocol.messages import (
    PROTOCOL_VERSION,
    Abort,
    ControlCall,
    ControlMethod,
    ControlReply,
    Delta,
    ErrorCode,
    Fatal,
    FinishReason,
    Heartbeat,
    Ready,
    Step,
    Submit,
    Usage,
)
from protocol.ready import TextInfo
from tests.support.direct import stream_generate
from tests.support.inputs import inputs_of
from worker.text.model import load_text_model
from worker.text.prompts import build_chat_prompt
from worker.tiny_models import ensure_checkpoint

ROOT = Path(__file__).resolve().parents[2]
HEARTBEAT_S = 0.2
POEM = [{"role": "user", "content": "Write a poem about the sea."}]
FIB = [{"role": "user", "content": "def fib(n):"}]

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def checkpoint() -> str:
    return str(ensure_checkpoint("qwen3"))


@pytest.fixture(scope="module")
def reference(checkpoint):
    """What mlx-lm gives when called directly: (text, tokens, prompt_len, segments)."""
    text_model = load_text_model(checkpoint)

    def greedy(messages, max_tokens: int):
        prompt = build_chat_prompt(text_model.tokenizer, messages, None)
        responses = list(
            stream_generate(
                text_model.model,
                text_model.tokenizer,
                prompt,
                max_tokens=max_tokens,
                sampler=make_sampler(0.0),
            )
        )
        segments = [r.text for r in responses]
        return "".join(segments), [r.token for r in responses], len(prompt), segments

    return greedy


@dataclass
class WorkerClient:
    """The gateway's side of the sockets, sorting what arrives by kind and request."""

    push: zmq.Socket
    pull: zmq.Socket
    process: subprocess.Popen | None = None
    deltas: dict[str, list[Delta]] = field(default_factory=lambda: defaultdict(list))
    replies: dict[int, ControlReply] = field(default_factory=dict)
    heartbeats: list[Heartbeat] = field(default_factory=list)
    others: list = field(default_factory=list)
    step_members: list[set[str]] = field(default_factory=list)  # request ids of each Step
    next_call: int = 0

    def send(self, message) -> None:
        self.push.send(encode(message))

    def pump(self, timeout: float) -> bool:
        if not self.pull.poll(int(timeout * 1000)):
            return False
        message = decode(self.pull.recv())
        if isinstance(message, Step):
            self.step_members.append({d.request_id for d in message.deltas})
            for delta in message.deltas:
                self.deltas[delta.request_id].append(delta)
        elif isinstance(message, ControlReply):
            self.replies[message.call_id] = message
        elif isinstance(message, Heartbeat):
            self.heartbeats.append(message)
        else:
            self.others.append(message)
        return True

    def wait_for(self, condition, timeout: float = 20.0, what: str = "a message"):
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            self.pump(0.1)
        return condition()

    def finished(self, request_id: str) -> list[Delta]:
        """Waits for the request's terminal delta; returns all its deltas."""
        self.wait_for(
            lambda: any(d.finish_reason for d in self.deltas[request_id]),
            what=f"the end of {request_id}",
        )
        return self.deltas[request_id]

    def call(self, method: ControlMethod) -> ControlReply:
        self.next_call += 1
        call_id = self.next_call
        self.send(ControlCall(call_id, method))
        return self.wait_for(lambda: self.replies.get(call_id), what=f"the {method} reply")

    def submit(self, request_id: str, inputs: dict, op: str = "chat", **sampling) -> None:
        sampling.setdefault("temperature", 0.0)
        self.send(Submit(request_id, inputs_of(op, inputs, **sampling), True))


def worker_command(model: str, endpoints: Endpoints, parent_pid: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "worker",
        "--model",
        model,
        "--to-worker",
        endpoints.to_worker,
        "--from-worker",
        endpoints.from_worker,
        "--parent-pid",
        str(parent_pid),
        "--heartbeat-interval",
        str(HEARTBEAT_S),
        "--log-level",
        "warning",
    ]


@pytest.fixture
def bound(tmp_path_factory):
    """Factory: binds a fresh socket pair (as the gateway does); closes them all at the end."""
    context = zmq.Context()
    opened: list[zmq.Socket] = []

    def bind() -> tuple[Endpoints, WorkerClient]:
        endpoints = Endpoints.ipc_in(str(tmp_path_factory.mktemp("ipc")))
        push, pull = context.socket(zmq.PUSH), context.socket(zmq.PULL)
        for sock in (push, pull):
            sock.setsockopt(zmq.LINGER, 0)
            opened.append(sock)
        push.bind(endpoints.to_worker)
        pull.bind(endpoints.from_worker)
        return endpoints, WorkerClient(push, pull)

    yield bind
    for sock in opened:
        sock.close()
    context.term()


def spawn(model: str, endpoints: Endpoints, *flags: str, env=None) -> subprocess.Popen:
    command = worker_command(model, endpoints, os.getpid()) + list(flags)
    return subprocess.Popen(command, cwd=ROOT, env=env)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(10)


@pytest.fixture(scope="module")
def worker(checkpoint, tmp_path_factory):
    """One worker shared by the tests that only talk to it."""
    context = zmq.Context()
    endpoints = Endpoints.ipc_in(str(tmp_path_factory.mktemp("ipc")))
    push, pull = context.socket(zmq.PUSH), context.socket(zmq.PULL)
    push.setsockopt(zmq.LINGER, 0)
    pull.setsockopt(zmq.LINGER, 0)
    push.bind(endpoints.to_worker)
    pull.bind(endpoints.from_worker)
    client = WorkerClient(push, pull, spawn(checkpoint, endpoints))
    try:
        client.wait_for(lambda: client.others, timeout=30, what="READY")
        yield client
    finally:
        stop(client.process)
        push.close()
        pull.close()
        context.term()


def text_of(deltas: list[Delta]) -> str:
    return "".join(d.text for d in deltas)


def tokens_of(deltas: list[Delta]) -> list[int]:
    return [t for d in deltas for t in d.token_ids]


def test_ready_carries_the_protocol_version_and_limits(worker, checkpoint):
    [ready] = worker.others
    assert isinstance(ready, Ready)
    assert ready.protocol_version == PROTOCOL_VERSION
    assert ready.model == checkpoint
    assert ready.capabilities == ["chat", "complete"]
    assert (ready.max_num_seqs, ready.text) == (8, TextInfo(4096, "continuous", adapters=[]))
    assert ready.speech is None and ready.transcription is None
    assert ready.pid == worker.process.pid


def test_greedy_chat_equals_mlx_lm_stream_generate(worker, reference):
    text, tokens, prompt_len, _ = reference(POEM, 16)
    worker.submit("greedy", {"messages": POEM}, max_tokens=16)
    deltas = worker.finished("greedy")
    accepted = deltas[0]
    assert (accepted.text, accepted.token_ids, accepted.finish_reason) == ("", [], None)
    assert text_of(deltas) == text
    assert tokens_of(deltas) == tokens
    assert deltas[-1].finish_reason == FinishReason.LENGTH
    usage = deltas[-1].usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (prompt_len, 16)
    assert [d for d in deltas if d.finish_reason] == [deltas[-1]]


def test_a_stop_string_truncates_the_output(worker, reference):
    text, _, prompt_len, segments = reference(POEM, 16)
    # A piece of the greedy output whose first occurrence lies past its start (the random
    # checkpoint's text depends on the tokenizer, so the stop string is picked from it).
    stop = next(
        text[i : i + 3]
        for i in range(len(text) // 3, len(text) - 3)
        if text[i : i + 3].strip() and text.find(text[i : i + 3]) == i
    )
    # completion_tokens counts up to and including the token that completed the stop string.
    completing = next(n for n in range(1, 17) if stop in "".join(segments[:n]))
    worker.submit("stopped", {"messages": POEM}, max_tokens=16, stop=[stop])
    deltas = worker.finished("stopped")
    assert text_of(deltas) == text[: text.find(stop)]
    assert deltas[-1].finish_reason == FinishReason.STOP
    usage = deltas[-1].usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (prompt_len, completing)


def test_two_interleaved_greedy_requests_each_equal_their_solo_output(worker, reference):
    worker.submit("poem", {"messages": POEM}, max_tokens=12)
    worker.submit("fib", {"messages": FIB}, max_tokens=12)
    poem, fib = worker.finished("poem"), worker.finished("fib")
    assert (text_of(poem), tokens_of(poem)) == reference(POEM, 12)[:2]
    assert (text_of(fib), tokens_of(fib)) == reference(FIB, 12)[:2]
    # They really were interleaved: both advanced in the same Steps (the second Submit may
    # arrive an iteration or two after the first, so not all 12).
    assert sum({"poem", "fib"} <= ids for ids in worker.step_members) >= 9


def test_abort_mid_generation_ends_the_request_and_stats_show_it(worker):
    before = worker.call(ControlMethod.STATS).stats.requests_aborted
    worker.submit("long", {"messages": POEM}, max_tokens=3000)
    worker.wait_for(lambda: len(worker.deltas["long"]) >= 4, what="a few tokens")
    worker.send(Abort(["long"]))
    deltas = worker.finished("long")
    assert deltas[-1].finish_reason == FinishReason.ABORT
    assert deltas[-1].usage.completion_tokens == len(tokens_of(deltas)) < 3000
    stats = worker.call(ControlMethod.STATS).stats
    assert (stats.active, stats.requests_aborted) == (0, before + 1)
    time.sleep(0.3)
    assert worker.call(ControlMethod.STATS).stats.tokens_generated == stats.tokens_generated


def test_heartbeats_arrive_while_idle(worker):
    seen = len(worker.heartbeats)
    worker.wait_for(lambda: len(worker.heartbeats) >= seen + 3, timeout=5, what="heartbeats")
    latest = worker.heartbeats[-1]
    assert (latest.active, latest.waiting) == (0, 0)
    assert abs(latest.time - time.time()) < 5


def test_a_prompt_longer_than_the_context_is_context_length_and_the_worker_goes_on(worker):
    worker.submit("too-long", {"prompt": [5] * 5000}, op="complete", max_tokens=4)
    [delta] = worker.finished("too-long")
    assert delta.finish_reason == FinishReason.ERROR
    assert delta.error.message == "prompt is too long: 5000 tokens > 4095 maximum"
    assert delta.error.code == ErrorCode.CONTEXT_LENGTH
    assert (delta.error.prompt_tokens, delta.error.max_prompt_tokens) == (5000, 4095)
    assert delta.usage == Usage(0, 0)
    worker.submit("after", {"prompt": [5, 6, 7]}, op="complete", max_tokens=3)
    assert worker.finished("after")[-1].finish_reason == FinishReason.LENGTH


def test_a_token_id_out_of_range_is_a_bad_request(worker):
    worker.submit("bad-id", {"prompt": [5, 99999]}, op="complete", max_tokens=4)
    [delta] = worker.finished("bad-id")
    assert delta.error.code == ErrorCode.BAD_REQUEST
    assert "99999" in delta.error.message


def test_garbage_frames_bad_messages_and_unknown_control_methods_do_not_hurt_the_worker(worker):
    worker.push.send(b"\x00 not msgpack \xff")
    worker.send(Abort(request_ids=5))  # decodes, but its field has the wrong type
    worker.push.send(msgpack.packb([3, 9, "no-such-method", None]))  # refused by its type
    assert worker.call(ControlMethod.STATS).ok
    assert worker.process.poll() is None


def test_shutdown_aborts_open_requests_replies_and_exits_0(checkpoint, bound):
    endpoints, client = bound()
    client.process = spawn(checkpoint, endpoints)
    try:
        client.wait_for(lambda: client.others, timeout=30, what="READY")
        client.submit("open", {"messages": POEM}, max_tokens=3000)
        client.wait_for(lambda: len(client.deltas["open"]) >= 2, what="a token")
        reply = client.call(ControlMethod.SHUTDOWN)
        assert reply.ok
        assert client.deltas["open"][-1].finish_reason == FinishReason.ABORT
        assert client.process.wait(10) == 0
    finally:
        stop(client.process)


def test_a_load_failure_sends_fatal_and_exits_1(bound, tmp_path):
    endpoints, client = bound()
    missing = str(tmp_path / "no-such-model")
    client.process = spawn(missing, endpoints)
    try:
        client.wait_for(lambda: client.others, timeout=30, what="FATAL")
        [fatal] = client.others
        assert isinstance(fatal, Fatal)
        assert fatal.message == "the model failed to load (FileNotFoundError)"
        assert missing in fatal.detail and "Traceback" in fatal.detail
        assert client.process.wait(10) == 1
    finally:
        stop(client.process)


def fatal_of(bound, *flags: str, model: str, env=None) -> Fatal:
    """Spawns a worker that must refuse to start; its Fatal (it exits 1). The message is the
    kind of failure only; the detail says why."""
    endpoints, client = bound()
    client.process = spawn(model, endpoints, *flags, env=env)
    try:
        client.wait_for(lambda: client.others, timeout=30, what="FATAL")
        [fatal] = client.others
        assert isinstance(fatal, Fatal)
        assert fatal.message.startswith("the model failed to load (")
        assert client.process.wait(10) == 1
        return fatal
    finally:
        stop(client.process)


def test_a_draft_model_with_another_vocabulary_is_refused_at_start(checkpoint, bound):
    llama = str(ensure_checkpoint("llama"))
    fatal = fatal_of(bound, "--draft-model", llama, model=checkpoint)
    assert "vocabulary" in fatal.detail and llama in fatal.detail


def test_a_kv_group_size_that_does_not_divide_the_head_size_is_refused_at_start(checkpoint, bound):
    fatal = fatal_of(bound, "--kv-bits", "8", "--kv-group-size", "64", model=checkpoint)
    assert "--kv-group-size 64" in fatal.detail


def test_blas_openblas_without_openblas_loaded_is_refused_at_start(checkpoint, bound):
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    fatal = fatal_of(bound, "--blas", "openblas", model=checkpoint, env=env)
    assert "OpenBLAS is not loaded" in fatal.detail


def test_logprobs_equal_mlx_lm_generate_step(worker, checkpoint):
    text_model = load_text_model(checkpoint)
    prompt = build_chat_prompt(text_model.tokenizer, POEM, None)
    reference = list(
        generate_step(mx.array(prompt), text_model.model, max_tokens=5, sampler=make_sampler(0.0))
    )
    worker.submit("lp", {"messages": POEM}, max_tokens=5, logprobs=2)
    entries = [e for d in worker.finished("lp") for e in (d.logprobs or [])]
    assert [e.token_id for e in entries] == [t for t, _ in reference]
    for entry, (token, logprobs) in zip(entries, reference, strict=True):
        assert entry.logprob == pytest.approx(logprobs[token].item(), abs=1e-4)
        assert [t[0] for t in entry.top][:1] == [token] and len(entry.top) == 2


def test_four_requests_share_steps_and_each_equals_its_solo_output(worker, reference):
    chats = {f"c{i}": [{"role": "user", "content": f"Count to {i}."}] for i in range(4)}
    for request_id, chat in chats.items():
        worker.submit(request_id, {"messages": chat}, max_tokens=10)
    for request_id, chat in chats.items():
        assert tokens_of(worker.finished(request_id)) == reference(chat, 10)[1]
    assert any(set(chats) <= ids for ids in worker.step_members)


def _is_gone(pid: int) -> bool:
    """True once `pid` exited (a zombie nobody reaped counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state in ("Z", "X")
    except FileNotFoundError:
        return True
    except OSError:  # no /proc (macOS): ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


def test_the_worker_exits_when_its_parent_dies(checkpoint, bound):
    endpoints, client = bound()
    # An intermediate parent spawns the worker, prints its pid, then waits to be killed.
    parent_script = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        command = {worker_command(checkpoint, endpoints, 0)!r}
        command[command.index("--parent-pid") + 1] = str(os.getpid())
        child = subprocess.Popen(command, cwd={str(ROOT)!r})
        print(child.pid, flush=True)
        time.sleep(120)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_script], stdout=subprocess.PIPE)
    worker_pid = None
    try:
        worker_pid = int(parent.stdout.readline())
        client.wait_for(lambda: client.others, timeout=30, what="READY")
        assert isinstance(client.others[0], Ready)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while not _is_gone(worker_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _is_gone(worker_pid)
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.wait(10)
        if worker_pid is not None and not _is_gone(worker_pid):
            os.kill(worker_pid, signal.SIGKILL)
