"""The scheduler loop with a fake generation (no MLX): admission, aborts, deadlines, Steps."""

from __future__ import annotations

import queue
from dataclasses import dataclass

from protocol.messages import (
    ControlReply,
    ErrorCode,
    FinishReason,
    SamplingParams,
    Step,
    Submit,
    Usage,
)
from worker.errors import bad_request
from worker.handoff import Handoff, ShutdownRequest
from worker.scheduler import Scheduler
from worker.stats import WorkerStats


@dataclass
class TokenStep:
    text: str
    token_ids: list[int]
    finish_reason: str | None = None


class FakeGeneration:
    """Emits "a", "b", "c", ... one per advance; calls the prefill callback on the first."""

    def __init__(self, submit: Submit, progress) -> None:
        self.prompt_tokens = 3
        self.completion_tokens = 0
        self.max_tokens = submit.sampling.max_tokens
        self.progress = progress
        self.closed = False
        self.fail_at = submit.inputs.get("fail_at")

    def advance(self) -> TokenStep:
        if self.completion_tokens == 0:
            self.progress(0, self.prompt_tokens)
        if self.completion_tokens == self.fail_at:
            raise RuntimeError("boom")
        self.completion_tokens += 1
        finish = FinishReason.LENGTH if self.completion_tokens == self.max_tokens else None
        return TokenStep(chr(96 + self.completion_tokens), [self.completion_tokens], finish)

    def close(self) -> None:
        self.closed = True


def start(submit: Submit, progress) -> FakeGeneration:
    if submit.inputs.get("bad"):
        raise bad_request("bad input")
    return FakeGeneration(submit, progress)


def submit(request_id: str, max_tokens: int = 3, deadline=None, **inputs) -> Submit:
    return Submit(
        request_id, "complete", inputs, SamplingParams(max_tokens=max_tokens), True, deadline
    )


class Harness:
    def __init__(self, max_num_seqs: int = 8, now: float = 1000.0) -> None:
        self.handoff = Handoff()
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.stats = WorkerStats(model="fake")
        self.now = now
        self.scheduler = Scheduler(
            start,
            self.handoff,
            self.outbox,
            self.stats,
            max_num_seqs,
            idle_wait=0.01,
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


def test_every_active_request_advances_one_token_per_iteration_in_one_step():
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


def test_an_abort_during_prefill_stops_the_prefill():
    h = Harness()
    h.put(submit("r1"))
    h.step()
    h.handoff.aborts.add(["r1"])  # seen by the prefill callback inside advance
    gen_deltas = h.step()
    assert [(d.request_id, d.finish_reason) for d in gen_deltas] == [("r1", FinishReason.ABORT)]


def test_a_passed_deadline_ends_the_request_with_a_deadline_error():
    h = Harness(now=1000.0)
    h.put(submit("r1", max_tokens=10, deadline=1001.0))
    h.step()
    h.step()
    h.now = 1002.0
    [delta] = h.step()
    assert delta.finish_reason == FinishReason.ERROR
    assert delta.error.code == ErrorCode.DEADLINE


def test_a_bad_request_ends_only_that_request():
    h = Harness()
    h.put(submit("bad", bad=True), submit("good"))
    deltas = by_id(h.step())
    assert deltas["bad"].finish_reason == FinishReason.ERROR
    assert deltas["bad"].error.code == ErrorCode.BAD_REQUEST
    assert deltas["bad"].usage == Usage(0, 0)
    assert deltas["good"].finish_reason is None


def test_an_exception_in_one_requests_step_is_an_internal_error_for_it_alone():
    h = Harness()
    h.put(submit("boom", max_tokens=5, fail_at=1), submit("ok", max_tokens=5))
    h.step()
    h.step()
    deltas = by_id(h.step())
    assert deltas["boom"].error.code == ErrorCode.INTERNAL
    assert "boom" in deltas["boom"].error.message
    assert deltas["boom"].usage == Usage(3, 1)
    assert deltas["ok"].text == "b"


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
    assert (
        snapshot["requests_total"],
        snapshot["prompt_tokens"],
        snapshot["tokens_generated"],
    ) == (
        1,
        3,
        2,
    )


def test_an_idle_iteration_sends_no_step():
    assert Harness().step() == []


def test_a_deadline_that_is_not_a_number_is_a_bad_request():
    h = Harness()
    h.put(submit("r1", deadline="soon"))
    [delta] = h.step()
    assert delta.error.code == ErrorCode.BAD_REQUEST
    assert "deadline" in delta.error.message


def test_a_submit_whose_request_id_is_not_a_string_is_dropped():
    h = Harness()
    h.put(submit(["not", "an", "id"]), submit("r1"))
    assert [d.request_id for d in h.step()] == ["r1"]
