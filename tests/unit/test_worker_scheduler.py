"""The scheduler loop with fake engines (no MLX): admission, routing, aborts, deadlines, Steps.

Submits of the wrong field types never reach it: they do not decode (tests/unit/test_protocol.py).
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
from protocol.messages import (
    ControlReply,
    Delta,
    ErrorCode,
    ErrorInfo,
    FinishReason,
    Step,
    Submit,
    Usage,
)
from worker.runtime.handoff import Handoff, ShutdownRequest
from worker.runtime.scheduler import Scheduler
from worker.runtime.stats import WorkerStats


class FakeEngine:
    """Emits "a", "b", "c", ... one token per step for every active request."""

    def __init__(self, ops=("complete",)) -> None:
        self.ops = frozenset(ops)
        self.active: dict[str, list] = {}  # id -> [generated, max_tokens]
        self.fail_step = False
        self.lose_on_abort = False
        self.steps = 0

    def admit(self, submit: Submit) -> Delta:
        max_tokens, bad = PLANNED.get(submit.request_id, (3, False))
        if bad:
            error = ErrorInfo(ErrorCode.BAD_REQUEST, "bad input")
            return Delta(submit.request_id, finish_reason="error", usage=Usage(0, 0), error=error)
        self.active[submit.request_id] = [0, max_tokens]
        return Delta(submit.request_id)

    def step(self) -> list[Delta]:
        self.steps += 1
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


def submit(request_id, max_tokens: int = 3, deadline=None, op="complete", bad=False) -> Submit:
    PLANNED[request_id] = (max_tokens, bad)
    return Submit(request_id, _INPUTS[op](max_tokens), True, deadline)


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
        self.scheduler = Scheduler(
            self.engines,
            self.handoff,
            self.outbox,
            self.stats,
            max_num_seqs,
            idle_wait=idle_wait,
            clock=lambda: self.now,
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


def test_an_accepted_request_first_gets_an_empty_delta_then_tokens():
    h = Harness()
    h.put(submit("r1"))
    [accepted] = h.step()
    assert (accepted.request_id, accepted.text, accepted.token_ids, accepted.finish_reason) == (
        "r1",
        "",
        [],
        None,
    )
    [first] = h.step()
    assert (first.text, first.token_ids) == ("a", [1])


def test_the_engine_is_not_stepped_before_the_accepted_delta_went_out():
    h = Harness()
    h.put(submit("r1"))
    h.step()
    assert h.engine.steps == 0


def test_every_active_request_advances_in_one_step_message():
    h = Harness()
    h.put(submit("r1"), submit("r2"))
    h.step()
    deltas = by_id(h.step())
    assert {k: d.text for k, d in deltas.items()} == {"r1": "a", "r2": "a"}


def test_the_last_token_ends_the_request_with_usage():
    h = Harness()
    h.put(submit("r1", max_tokens=2))
    h.step()
    h.step()
    [last] = h.step()
    assert (last.text, last.finish_reason, last.usage) == ("b", FinishReason.LENGTH, Usage(3, 2))
    assert h.step() == []


def test_requests_beyond_max_num_seqs_wait_in_fifo_order():
    h = Harness(max_num_seqs=1)
    h.put(submit("r1", max_tokens=1), submit("r2"), submit("r3"))
    assert [d.request_id for d in h.step()] == ["r1"]
    assert h.stats.snapshot()["waiting"] == 2
    deltas = by_id(h.step())  # r1 finishes, r2 is admitted
    assert deltas["r1"].finish_reason == FinishReason.LENGTH
    assert deltas["r2"].text == "" and "r3" not in deltas


def test_a_request_joins_while_others_are_generating():
    h = Harness()
    h.put(submit("r1", max_tokens=5))
    h.step()
    h.step()
    h.put(submit("r2", max_tokens=5))
    deltas = by_id(h.step())
    assert (deltas["r1"].text, deltas["r2"].text) == ("b", "")
    deltas = by_id(h.step())
    assert (deltas["r1"].text, deltas["r2"].text) == ("c", "a")


def test_aborting_an_active_request_ends_it_with_usage_so_far():
    h = Harness()
    h.put(submit("r1", max_tokens=10))
    h.step()
    h.step()
    h.handoff.aborts.add(["r1"])
    [aborted] = h.step()
    assert (aborted.finish_reason, aborted.usage) == (FinishReason.ABORT, Usage(3, 1))
    assert h.stats.snapshot()["requests_aborted"] == 1
    assert h.stats.snapshot()["active"] == 0


def test_aborting_one_request_leaves_the_others_running():
    h = Harness()
    h.put(submit("r1", max_tokens=10), submit("r2", max_tokens=10))
    h.step()
    h.step()
    h.handoff.aborts.add(["r1"])
    deltas = by_id(h.step())
    assert deltas["r1"].finish_reason == FinishReason.ABORT
    assert (deltas["r2"].text, deltas["r2"].finish_reason) == ("b", None)


def test_aborting_a_waiting_request_ends_it_without_starting_it():
    h = Harness(max_num_seqs=1)
    h.put(submit("r1", max_tokens=10), submit("r2"))
    h.step()
    h.handoff.aborts.add(["r2"])
    deltas = by_id(h.step())
    assert (deltas["r2"].finish_reason, deltas["r2"].usage) == (FinishReason.ABORT, Usage(0, 0))


def test_an_abort_that_arrives_with_its_submit_is_applied():
    h = Harness()
    h.put(submit("r1"))
    h.handoff.aborts.add(["r1"])
    [delta] = h.step()
    assert delta.finish_reason == FinishReason.ABORT


def test_an_abort_for_an_unknown_request_is_ignored():
    h = Harness()
    h.handoff.aborts.add(["nobody"])
    assert h.step() == []
    assert h.handoff.aborts.drain() == set()


def test_a_request_its_engine_loses_on_abort_still_gets_its_terminal_delta():
    h = Harness()
    h.engine.lose_on_abort = True
    h.put(submit("r1", max_tokens=10))
    h.step()
    h.handoff.aborts.add(["r1"])
    [delta] = h.step()
    assert delta.finish_reason == FinishReason.ERROR
    assert delta.usage == Usage(0, 0)


def test_a_passed_deadline_ends_the_request_with_a_deadline_error_and_usage():
    h = Harness(now=1000.0)
    h.put(submit("r1", max_tokens=10, deadline=1001.0))
    h.step()
    h.step()
    h.now = 1002.0
    [delta] = h.step()
    assert delta.finish_reason == FinishReason.ERROR
    assert delta.error.code == ErrorCode.DEADLINE
    assert delta.usage == Usage(3, 1)
    assert h.stats.snapshot()["requests_aborted"] == 0


def test_a_waiting_request_past_its_deadline_ends_without_starting():
    h = Harness(max_num_seqs=1, now=1000.0)
    h.put(submit("r1", max_tokens=10), submit("r2", deadline=1001.0))
    h.step()
    h.now = 1002.0
    deltas = by_id(h.step())
    assert deltas["r2"].error.code == ErrorCode.DEADLINE
    assert "r2" not in h.engine.active


def test_a_bad_request_ends_only_that_request():
    h = Harness()
    h.put(submit("bad", bad=True), submit("good"))
    deltas = by_id(h.step())
    assert deltas["bad"].finish_reason == FinishReason.ERROR
    assert deltas["bad"].error.code == ErrorCode.BAD_REQUEST
    assert deltas["bad"].usage == Usage(0, 0)
    assert deltas["good"].finish_reason is None


def test_an_engine_step_that_raises_ends_its_requests_and_the_worker_goes_on():
    h = Harness()
    h.put(submit("r1", max_tokens=5), submit("r2", max_tokens=5))
    h.step()
    h.engine.fail_step = True
    deltas = by_id(h.step())
    assert {d.error.code for d in deltas.values()} == {ErrorCode.INTERNAL}
    assert deltas["r1"].error.message == "the worker failed this request (RuntimeError)"
    h.engine.fail_step = False
    h.put(submit("r3", max_tokens=1))
    h.step()
    [done] = h.step()
    assert (done.request_id, done.finish_reason) == ("r3", FinishReason.LENGTH)


def test_an_operation_no_engine_serves_is_a_bad_request_naming_the_ops():
    h = Harness()
    h.put(submit("r1", op="speech"))
    [delta] = h.step()
    assert delta.error.code == ErrorCode.BAD_REQUEST
    assert "'speech'" in delta.error.message and "complete" in delta.error.message


def test_submits_are_routed_to_the_engine_serving_their_op():
    text, speech = FakeEngine(ops=("complete",)), FakeEngine(ops=("speech",))
    h = Harness(engines=[text, speech])
    h.put(submit("t", op="complete"), submit("s", op="speech"))
    h.step()
    assert (list(text.active), list(speech.active)) == (["t"], ["s"])
    assert set(by_id(h.step())) == {"t", "s"}


def test_max_num_seqs_counts_the_requests_of_every_engine():
    text, speech = FakeEngine(ops=("complete",)), FakeEngine(ops=("speech",))
    h = Harness(max_num_seqs=1, engines=[text, speech])
    h.put(submit("t", op="complete", max_tokens=5), submit("s", op="speech"))
    h.step()
    assert (list(text.active), list(speech.active)) == (["t"], [])


def test_a_duplicate_request_id_is_rejected_without_touching_the_first():
    h = Harness()
    h.put(submit("r1", max_tokens=5))
    h.step()
    h.put(submit("r1"))
    deltas = h.step()
    assert [d.finish_reason for d in deltas] == [FinishReason.ERROR, None]


def test_shutdown_aborts_everything_replies_and_ends_the_loop():
    h = Harness(max_num_seqs=1)
    h.put(submit("r1", max_tokens=10), submit("r2"))
    h.step()
    h.put(ShutdownRequest(call_id=7))
    assert h.scheduler.iteration() is False
    step, reply = h.outbox.get(), h.outbox.get()
    assert {d.request_id: d.finish_reason for d in step.deltas} == {
        "r1": FinishReason.ABORT,
        "r2": FinishReason.ABORT,
    }
    assert reply == ControlReply(call_id=7, ok=True)


def test_stats_count_requests_and_tokens():
    h = Harness()
    h.put(submit("r1", max_tokens=2))
    for _ in range(3):
        h.step()
    snapshot = h.stats.snapshot()
    counts = (snapshot["requests_total"], snapshot["prompt_tokens"], snapshot["tokens_generated"])
    assert counts == (1, 3, 2)


def test_an_idle_iteration_sends_no_step():
    assert Harness().step() == []


def test_aborting_requests_of_several_engines_at_once_ends_each_exactly_once():
    text, speech, asr = (FakeEngine(ops=(op,)) for op in ("complete", "speech", "transcribe"))
    h = Harness(engines=[text, speech, asr])
    h.put(
        submit("t", op="complete", max_tokens=9),
        submit("s", op="speech", max_tokens=9),
        submit("a", op="transcribe", max_tokens=9),
    )
    h.step()
    h.handoff.aborts.add(["t", "s", "a"])
    ended = by_id(h.step())
    assert {i: d.finish_reason for i, d in ended.items()} == dict.fromkeys("tsa", "abort")
    assert not (text.active or speech.active or asr.active)


def test_deadlines_passing_on_several_engines_at_once_end_each_with_a_deadline_error():
    text, speech = FakeEngine(ops=("complete",)), FakeEngine(ops=("speech",))
    h = Harness(engines=[text, speech])
    h.put(
        submit("t", op="complete", max_tokens=9, deadline=h.now + 1),
        submit("s", op="speech", max_tokens=9, deadline=h.now + 1),
    )
    h.step()
    h.now += 2
    ended = by_id(h.step())
    assert {i: d.error.code for i, d in ended.items()} == dict.fromkeys("ts", ErrorCode.DEADLINE)
