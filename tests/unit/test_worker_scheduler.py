"""The scheduler loop with fake engines (no MLX): admission, routing, aborts, deadlines, Steps,
and engines sharing the thread's time (a chat next to speech).

Submits of the wrong field types never reach it: they do not decode (tests/unit/test_protocol.py).
"""

from __future__ import annotations

import threading
import time

import pytest

from protocol.messages import ControlReply, ErrorCode, FinishReason, Usage
from tests.support.scheduler_fakes import FakeEngine, Harness, by_id, submit
from worker.runtime.handoff import ShutdownRequest
from worker.runtime.scheduler import SHARE_SLACK, WAKE_CREDIT


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
    assert h.stats.snapshot().waiting == 2
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
    assert h.stats.snapshot().requests_aborted == 1
    assert h.stats.snapshot().active == 0


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


@pytest.mark.parametrize(
    "limit, finish, error",
    [
        ("deadline", FinishReason.ERROR, ErrorCode.DEADLINE),  # the server's: an error
        ("time_limit", FinishReason.LENGTH, None),  # a request's own `timeout`: as max_tokens
    ],
)
def test_a_passed_deadline_or_time_limit_ends_the_request_with_its_usage(limit, finish, error):
    h = Harness(now=1000.0)
    h.put(submit("r1", max_tokens=10, **{limit: 1001.0}))
    h.step()
    h.step()
    h.now = 1002.0
    [delta] = h.step()
    assert delta.finish_reason == finish
    assert (delta.error.code if delta.error else None) == error
    assert delta.usage == Usage(3, 1)
    assert h.stats.snapshot().requests_aborted == 0


def test_a_waiting_request_past_its_deadline_ends_without_starting():
    h = Harness(max_num_seqs=1, now=1000.0)
    h.put(submit("r1", max_tokens=10), submit("r2", deadline=1001.0))
    h.step()
    h.now = 1002.0
    deltas = by_id(h.step())
    assert deltas["r2"].error.code == ErrorCode.DEADLINE
    assert "r2" not in h.engine.active


def test_a_waiting_request_past_its_time_limit_ends_with_length_without_starting():
    h = Harness(max_num_seqs=1, now=1000.0)
    h.put(submit("r1", max_tokens=10), submit("r2", time_limit=1001.0, deadline=1005.0))
    h.step()
    h.now = 1002.0
    deltas = by_id(h.step())
    assert (deltas["r2"].finish_reason, deltas["r2"].error) == (FinishReason.LENGTH, None)
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
    counts = (snapshot.requests_total, snapshot.prompt_tokens, snapshot.tokens_generated)
    assert counts == (1, 3, 2)


def test_an_idle_iteration_sends_no_step():
    assert Harness().step() == []


class StalledEngine(FakeEngine):
    """A FakeEngine whose requests can wait on work off the MLX thread (`stalled`)."""

    def __init__(self) -> None:
        super().__init__()
        self.is_stalled = False
        self.wake = None

    def bind_wake(self, wake) -> None:
        self.wake = wake

    def stalled(self) -> bool:
        return self.is_stalled


def test_an_engine_stalled_off_the_thread_is_not_spun_on_and_its_wake_ends_the_wait():
    engine = StalledEngine()
    harness = Harness(engines=[engine], idle_wait=0.2)
    harness.put(submit("r", max_tokens=5))
    harness.step()
    steps = engine.steps
    engine.is_stalled = True
    started = time.perf_counter()
    harness.step()  # it waited for the inbox (the engine stepped once after)
    assert time.perf_counter() - started >= 0.15 and engine.steps == steps + 1
    threading.Timer(0.05, engine.wake).start()
    started = time.perf_counter()
    assert by_id(harness.step())["r"].text  # woken: the wake is no inbox item
    assert 0.03 <= time.perf_counter() - started < 0.15
    engine.is_stalled = False
    started = time.perf_counter()
    harness.step()
    assert time.perf_counter() - started < 0.05  # with work, no wait


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


# -- engines sharing the MLX thread's time (a chat next to speech) ---------------------------

TEXT_STEP, SPEECH_STEP = 0.002, 0.025  # seconds: a small model's decode step, a speech step


def _speech_then_chat(chat_tokens: int) -> tuple[Harness, list[str]]:
    """Speech alone for a while, then a chat: which engine stepped, iteration by iteration
    ("t", "s" or "ts"), from the chat's first step to its last token."""
    text = FakeEngine(ops=("complete",), cost=TEXT_STEP)
    speech = FakeEngine(ops=("speech",), cost=SPEECH_STEP)
    h = Harness(engines=[text, speech])
    h.put(submit("s", op="speech", max_tokens=100_000))
    for _ in range(5):
        h.step()
    h.put(submit("c", max_tokens=chat_tokens))
    h.step()  # the chat is admitted (after the iteration's speech step)
    order = []
    while "c" in text.active:
        before = (text.steps, speech.steps)
        h.step()
        order.append("t" * (text.steps - before[0]) + "s" * (speech.steps - before[1]))
    return h, order


def test_an_engine_alone_steps_every_iteration_whatever_its_steps_take():
    speech = FakeEngine(ops=("speech",), cost=SPEECH_STEP)
    h = Harness(engines=[FakeEngine(), speech])
    h.put(submit("s", op="speech", max_tokens=50))
    for _ in range(11):
        h.step()
    assert speech.steps == 10


def test_a_short_chat_during_speech_runs_before_the_next_speech_step():
    _, order = _speech_then_chat(16)  # 32 ms of decode steps: within WAKE_CREDIT
    assert order == ["t"] * 16


def test_a_long_chat_and_speech_share_the_thread_by_time():
    h, order = _speech_then_chat(500)  # 1 s of decode steps
    speech_steps = sum(o.count("s") for o in order)
    text_time, speech_time = 500 * TEXT_STEP, speech_steps * SPEECH_STEP
    # The chat's credit first, then even shares (to within a step and the slack).
    assert abs(speech_time - (text_time - WAKE_CREDIT)) <= SPEECH_STEP + SHARE_SLACK
    assert speech_steps > 10


def test_text_decode_steps_run_between_speech_steps():
    _, order = _speech_then_chat(500)
    tokens_between = [len(run) for run in "".join(order).split("s")[1:-1]]
    # After each 25 ms speech step, ~(25 - 5) / 2 decode steps before the speech's turn.
    assert tokens_between and all(9 <= n <= 14 for n in tokens_between), tokens_between


def test_speech_that_starts_during_a_long_chat_is_served_first_then_shares():
    text = FakeEngine(ops=("complete",), cost=TEXT_STEP)
    speech = FakeEngine(ops=("speech",), cost=SPEECH_STEP)
    h = Harness(engines=[text, speech])
    h.put(submit("c", max_tokens=100_000))
    for _ in range(50):
        h.step()
    h.put(submit("s", op="speech", max_tokens=100_000))
    h.step()
    text_before = text.steps
    for _ in range(2):  # its credit: two 25 ms steps before the chat's next decode step
        h.step()
    assert (speech.steps, text.steps) == (2, text_before)
    for _ in range(400):
        h.step()
    assert abs(speech.steps * SPEECH_STEP - (text.steps - text_before) * TEXT_STEP) < 0.1


def test_back_to_back_chats_leave_the_speech_about_half_the_thread():
    text = FakeEngine(ops=("complete",), cost=TEXT_STEP)
    speech = FakeEngine(ops=("speech",), cost=SPEECH_STEP)
    h = Harness(engines=[text, speech])
    h.put(submit("s", op="speech", max_tokens=100_000))
    for _ in range(5):
        h.step()
    start = (text.steps, speech.steps)
    # Each chat is sent as soon as the one before has ended, and is 44 ms of decode steps:
    # within WAKE_CREDIT, so a head start as long as WAKE_CREDIT each time would leave the
    # speech little more than the gaps between chats (a third of the thread).
    for n in range(20):
        h.put(submit(f"c{n}", max_tokens=22))
        h.step()
        while not any(d.finish_reason for d in h.step() if d.request_id == f"c{n}"):
            pass
    text_time = (text.steps - start[0]) * TEXT_STEP
    speech_time = (speech.steps - start[1]) * SPEECH_STEP
    # Each chat's head start is no longer than the text engine was idle before it.
    assert speech_time / (text_time + speech_time) >= 0.45
