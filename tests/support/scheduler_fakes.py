"""Fake modality engines and a scheduler harness for the MLX thread's loop (no MLX).

A FakeEngine emits "a", "b", "c", ... one token per step for each active request; `submit()`
says how many tokens a request gets and whether the engine refuses it. `Harness` runs the real
Scheduler over fake engines with a clock the test moves, and a step timer that only the
engines' `cost` (seconds a step takes) moves: with no costs, every engine's steps take no time.
"""

from __future__ import annotations

import queue

from protocol.inputs import (
    CompleteInputs,
    EmbedInputs,
    SamplingParams,
    SpeechInputs,
    TranscribeInputs,
)
from protocol.messages import Delta, ErrorCode, ErrorInfo, FinishReason, Step, Submit, Usage
from worker.runtime.handoff import Handoff
from worker.runtime.scheduler import Scheduler
from worker.runtime.stats import WorkerStats


class FakeEngine:
    """Emits "a", "b", "c", ... one token per step for every active request."""

    def __init__(self, ops=("complete",), cost: float = 0.0) -> None:
        self.ops = frozenset(ops)
        self.active: dict[str, list] = {}  # id -> [generated, max_tokens]
        self.fail_step = False
        self.lose_on_abort = False
        self.steps = 0
        self.cost = cost  # seconds each step takes on the harness's step timer
        self.timer: StepTimer | None = None

    def admit(self, submit: Submit) -> Delta:
        max_tokens, bad = PLANNED.get(submit.request_id, (3, False))
        if bad:
            error = ErrorInfo(ErrorCode.BAD_REQUEST, "bad input")
            return Delta(submit.request_id, finish_reason="error", usage=Usage(0, 0), error=error)
        self.active[submit.request_id] = [0, max_tokens]
        return Delta(submit.request_id)

    def step(self) -> list[Delta]:
        self.steps += 1
        if self.timer is not None:
            self.timer.now += self.cost
        if self.fail_step:
            raise RuntimeError("boom")
        deltas = []
        for request_id, state in list(self.active.items()):
            state[0] += 1
            delta = Delta(request_id, text=chr(96 + state[0]), token_ids=[state[0]])
            if state[0] == state[1]:
                del self.active[request_id]
                delta.finish_reason, delta.usage = FinishReason.LENGTH, Usage(3, state[0])
            deltas.append(delta)
        return deltas

    def abort(self, request_ids) -> list[Delta]:
        ended = []
        for request_id in request_ids:
            state = self.active.pop(request_id, None)
            if state is not None and not self.lose_on_abort:
                ended.append(Delta(request_id, finish_reason="abort", usage=Usage(3, state[0])))
        return ended

    def active_ids(self) -> list[str]:
        return list(self.active)

    def capabilities(self) -> list[str]:
        return sorted(self.ops)

    def ready_info(self) -> dict:
        return {}


# request id -> (tokens the fake engine makes, whether it refuses the input), set by submit()
PLANNED: dict[str, tuple[int, bool]] = {}
_INPUTS = {
    "complete": lambda n: CompleteInputs("x", SamplingParams(max_tokens=n)),
    "speech": lambda n: SpeechInputs("x"),
    "transcribe": lambda n: TranscribeInputs(b"RIFF"),
    "embed": lambda n: EmbedInputs(["x"]),
}


def submit(
    request_id, max_tokens: int = 3, deadline=None, op="complete", bad=False, time_limit=None
) -> Submit:
    PLANNED[request_id] = (max_tokens, bad)
    return Submit(request_id, _INPUTS[op](max_tokens), True, deadline, time_limit=time_limit)


class StepTimer:
    """The scheduler's step timer in tests: moved by the fake engines' step costs only."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Harness:
    def __init__(
        self, max_num_seqs: int = 8, now: float = 1000.0, engines=None, idle_wait: float = 0.01
    ) -> None:
        self.handoff = Handoff()
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.stats = WorkerStats(model="fake")
        self.now = now
        self.engines = engines or [FakeEngine()]
        self.engine = self.engines[0]
        self.timer = StepTimer()
        for engine in self.engines:
            if isinstance(engine, FakeEngine):
                engine.timer = self.timer
        self.scheduler = Scheduler(
            self.engines,
            self.handoff,
            self.outbox,
            self.stats,
            max_num_seqs,
            idle_wait=idle_wait,
            clock=lambda: self.now,
            timer=self.timer,
        )

    def put(self, *items) -> None:
        for item in items:
            self.handoff.inbox.put(item)

    def step(self) -> list:
        """Runs one iteration; returns its Step's deltas ([] when no Step was sent)."""
        self.scheduler.iteration()
        messages = []
        while not self.outbox.empty():
            messages.append(self.outbox.get())
        steps = [m for m in messages if isinstance(m, Step)]
        assert len(steps) <= 1, "one Step per iteration"
        return steps[0].deltas if steps else []


def by_id(deltas) -> dict:
    assert len({d.request_id for d in deltas}) == len(deltas), "one delta per request per Step"
    return {d.request_id: d for d in deltas}
