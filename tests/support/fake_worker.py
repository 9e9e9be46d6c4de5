"""A stand-in worker process for the engine tests: speaks the protocol, imports no MLX.

It takes the real worker's arguments plus a few of its own, connects like the real worker,
sends READY, and answers each Submit with the empty "accepted" delta, then `max_tokens` text
deltas (" t1", " t2", ...) at `--token-interval`, then a terminal "length" delta. It honours
Abort, answers the "stats" and "shutdown" ControlCalls and sends heartbeats when otherwise
silent. Misbehaviour on demand:

  argv:   --fail-load MSG        send Fatal(MSG) and exit 1 instead of READY
          --exit-at-load CODE    print to stderr and exit with CODE instead of READY
          --protocol-version N   put N in READY
          --ready-extra-field    append a field to READY (another version's layout)
          --ready-delay S        load for S seconds first
  prompt: CRASH                  os._exit(7) right after the request's first text delta
          HANG                   stop sending anything (heartbeats too), forever
          FAIL                   end the request with a bad_request error
          FATAL                  send Fatal (a traceback naming a file in its detail), then
                                 take 2 s to exit 1, as a worker winding down would

With --events FILE it appends one JSON line per start / exit / crash (pid, time.time(),
model, HF_HUB_OFFLINE) so tests can check which process lived when.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import msgpack  # noqa: E402
import zmq  # noqa: E402

from protocol import decode, encode  # noqa: E402
from protocol.inputs import CompleteInputs  # noqa: E402
from protocol.messages import (  # noqa: E402
    PROTOCOL_VERSION,
    Abort,
    ControlCall,
    ControlMethod,
    ControlReply,
    Delta,
    ErrorInfo,
    Fatal,
    Heartbeat,
    Ready,
    Step,
    Submit,
    Usage,
    WorkerCounters,
)
from protocol.ready import Capability, TextInfo  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--to-worker", required=True)
    p.add_argument("--from-worker", required=True)
    p.add_argument("--parent-pid", type=int, required=True)
    p.add_argument("--max-num-seqs", type=int, default=8)
    p.add_argument("--heartbeat-interval", type=float, default=0.5)
    p.add_argument("--log-level", default="info")
    p.add_argument("--events")
    p.add_argument("--observations", help="on each stats call, write what it saw here (JSON)")
    p.add_argument("--token-interval", type=float, default=0.02)
    p.add_argument("--fail-load")
    p.add_argument("--exit-at-load", type=int)
    p.add_argument("--protocol-version", type=int, default=PROTOCOL_VERSION)
    p.add_argument("--ready-delay", type=float, default=0.0)
    p.add_argument("--ready-extra-field", action="store_true")
    return p.parse_args(argv)


class FakeWorker:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.ctx = zmq.Context()
        self.pull = self.ctx.socket(zmq.PULL)
        self.pull.connect(args.to_worker)
        self.push = self.ctx.socket(zmq.PUSH)
        self.push.connect(args.from_worker)
        self.active: dict[str, dict] = {}  # request id -> progress
        self.submitted: list[str] = []
        self.http_request_ids: list[str | None] = []
        self.aborted: list[str] = []
        self.tokens = 0
        self.peak_active = 0  # the most requests generating at once
        self.last_sent = time.monotonic()

    def record(self, event: str) -> None:
        if self.args.events:
            line = {
                "event": event,
                "pid": os.getpid(),
                "time": time.time(),
                "model": self.args.model,
                "hf_hub_offline": os.environ.get("HF_HUB_OFFLINE"),
            }
            with open(self.args.events, "a") as f:
                f.write(json.dumps(line) + "\n")

    def send(self, message) -> None:
        self.push.send(encode(message))
        self.last_sent = time.monotonic()

    def exit(self, code: int) -> None:
        self.record("exit")
        self.push.close(linger=2000)  # deliver what is queued (a Fatal, a reply) first
        self.pull.close(linger=0)
        self.ctx.term()
        sys.exit(code)

    def load(self) -> None:
        time.sleep(self.args.ready_delay)
        if self.args.fail_load:
            self.send(Fatal(self.args.fail_load, "fake load failure"))
            self.exit(1)
        if self.args.exit_at_load is not None:
            print("fake worker: cannot load the model", file=sys.stderr, flush=True)
            self.record("exit")
            os._exit(self.args.exit_at_load)
        ready = Ready(
            self.args.protocol_version,
            os.getpid(),
            self.args.model,
            [Capability.CHAT, Capability.COMPLETE],
            self.args.max_num_seqs,
            TextInfo(4096, "continuous"),
        )
        if self.args.ready_extra_field:  # a READY laid out by some other protocol version
            self.push.send(msgpack.packb([*msgpack.unpackb(encode(ready)), "extra"]))
        else:
            self.send(ready)

    def run(self) -> None:
        self.load()
        while True:
            if os.getppid() != self.args.parent_pid:
                self.exit(0)  # the gateway is gone
            if self.pull.poll(timeout=self._poll_ms()):
                self.handle(decode(self.pull.recv()))
                continue
            self.step()
            if time.monotonic() - self.last_sent >= self.args.heartbeat_interval:
                self.send(Heartbeat(time.time(), len(self.active), 0))

    def _poll_ms(self) -> int:
        due = [r["next"] for r in self.active.values()]
        due.append(self.last_sent + self.args.heartbeat_interval)
        return max(0, int((min(due) - time.monotonic()) * 1000))

    def handle(self, msg) -> None:
        if isinstance(msg, Submit):
            self.submit(msg)
        elif isinstance(msg, Abort):
            for rid in msg.request_ids:
                if self.active.pop(rid, None) is not None:
                    self.aborted.append(rid)
                    self.send(Step([Delta(rid, finish_reason="abort", usage=Usage(1, 0))]))
        elif isinstance(msg, ControlCall):
            self.control(msg)

    def submit(self, msg: Submit) -> None:
        inputs = msg.inputs
        if isinstance(inputs, CompleteInputs):
            text = str(inputs.prompt)
        else:
            text = " ".join(str(m.get("content")) for m in inputs.messages)
        self.submitted.append(msg.request_id)
        self.http_request_ids.append(msg.http_request_id)
        self.send(Step([Delta(msg.request_id)]))  # accepted
        if "HANG" in text:
            self.hang()
        if "FATAL" in text:
            detail = 'Traceback (most recent call last):\n  File "/srv/secret/worker.py"\nKeyError'
            self.send(Fatal("the worker loop failed (KeyError)", detail))
            self.record("fatal")
            time.sleep(2.0)
            self.exit(1)
        if "FAIL" in text:
            error = ErrorInfo("bad_request", "the fake worker was told to fail")
            self.send(
                Step([Delta(msg.request_id, finish_reason="error", usage=Usage(1, 0), error=error)])
            )
            return
        self.active[msg.request_id] = {
            "made": 0,
            "max": inputs.sampling.max_tokens,
            "next": time.monotonic() + self.args.token_interval,
            "crash": "CRASH" in text,
        }
        self.peak_active = max(self.peak_active, len(self.active))

    def step(self) -> None:
        now = time.monotonic()
        deltas = []
        for rid, r in list(self.active.items()):
            if r["next"] > now:
                continue
            r["made"] += 1
            r["next"] = now + self.args.token_interval
            self.tokens += 1
            deltas.append(Delta(rid, text=f" t{r['made']}", token_ids=[r["made"]]))
            if r["made"] >= r["max"]:
                del self.active[rid]
                deltas.append(Delta(rid, finish_reason="length", usage=Usage(1, r["made"])))
        if deltas:
            self.send(Step(deltas))
        if any(r["crash"] and r["made"] >= 1 for r in self.active.values()):
            self.record("crash")
            time.sleep(0.05)  # let the delta leave before dying
            os._exit(7)

    def control(self, call: ControlCall) -> None:
        if call.method == ControlMethod.STATS:
            if self.args.observations:  # what only a fake sees, for the tests (engine_harness)
                seen = {
                    "peak_active": self.peak_active,
                    "aborted": self.aborted,
                    "submitted": self.submitted,
                    "http_request_ids": self.http_request_ids,
                }
                partial = f"{self.args.observations}.{os.getpid()}"
                with open(partial, "w") as f:
                    json.dump(seen, f)
                os.replace(partial, self.args.observations)
            counters = WorkerCounters(
                model=self.args.model, pid=os.getpid(), active=len(self.active), waiting=0,
                active_request_ids=list(self.active), requests_total=len(self.submitted),
                requests_aborted=len(self.aborted), tokens_generated=self.tokens,
                prompt_tokens=0, prefix_cache_queries=len(self.submitted),  # a total, as real
                prefix_cache_hits=0, prefill_tokens_in_decode_steps=0, speech_seconds=0.0,
                transcribed_seconds=0.0,
            )  # fmt: skip
            self.send(ControlReply(call.call_id, True, stats=counters))
        elif call.method == ControlMethod.SHUTDOWN:
            self.send(ControlReply(call.call_id, True))
            self.exit(0)
        else:
            self.send(ControlReply(call.call_id, False, f"unknown method {call.method}"))

    def hang(self) -> None:
        self.record("hang")
        while os.getppid() == self.args.parent_pid:
            time.sleep(0.1)
        os._exit(0)


if __name__ == "__main__":
    worker = FakeWorker(parse_args(sys.argv[1:]))
    worker.record("start")
    worker.run()
