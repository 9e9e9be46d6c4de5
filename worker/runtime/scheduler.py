"""The MLX thread's loop: admit, abort, expire and step requests; one Step message per iteration.

The scheduler owns the request lifecycle; the engines (worker.runtime.engine.Engine, e.g. the text
engine with continuous batching) own the model work. Each iteration:
1. drain the abort set, then the inbox (so an abort is never seen before its own Submit);
   with nothing to step (no active request, or only requests of engines that are `stalled()`:
   waiting on work off the MLX thread, which wakes the handoff when done) it waits for the
   inbox, up to `IDLE_WAIT` seconds;
2. end aborted and expired requests (the engines apply it between their units of work: decode
   steps, prefill chunks);
3. `step()` the engines that have active requests (the text engine: one decode step for every
   generating request, one prefill chunk for every prefilling one; the speech engine: one
   short unit of audio work per request), sharing the MLX thread's time between them: an
   engine whose steps so far took more than `SHARE_SLACK` seconds longer than the least-served
   busy engine's waits this iteration (engines take turns by time, not by step), and an engine
   that becomes busy next to busy ones starts behind them by as long as it was idle, at most
   `WAKE_CREDIT` seconds. Alone, an engine steps every iteration; a chat that arrives during
   speech runs its first `WAKE_CREDIT` seconds of decode steps before the speech's next step,
   then half the thread, instead of one token per speech step, and back-to-back chats leave
   the speech at least about half (docs/benchmarks.md, "Chat next to speech");
4. admit waiting requests (FIFO) while fewer than `max_num_seqs` are active: the engine checks
   and tokenizes each and answers its empty "accepted" Delta, before its prefill starts (that
   is the next iteration's step);
5. send every Delta of the iteration in one Step message (none when nothing happened), and
   log each request that ended (worker.runtime.request_log).
Invariants: every Submit gets exactly one terminal Delta, and it carries usage; a request's
first Delta is its accepted Delta (or its terminal error).
On a rank of a distributed group (`lockstep`, worker/distributed/lockstep.py) steps 1 and 2
start from rank 0's Round instead of this process's handoff and clock, so every rank admits,
aborts, expires and steps the same requests in the same order. There an engine step that
raises ends the loop instead of its requests: a collective that failed (a rank died) or a rank
whose state now differs from the others' leaves a group that cannot step on, so rank 0 reports
Fatal (which ends every open request, worker/runtime/process.py) and mlx.launch stops the rest.
"""

from __future__ import annotations

import logging
import queue
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
from worker.distributed.lockstep import Lockstep, Round
from worker.runtime.engine import Engine
from worker.runtime.errors import RequestError, bad_request, internal
from worker.runtime.handoff import AdapterChange, Handoff, ShutdownRequest
from worker.runtime.request_log import RequestLog, named
from worker.runtime.stats import WorkerStats
from worker.text.adapters.control import change_adapter

log = logging.getLogger(__name__)

_DEADLINE_ERROR = ErrorInfo(code=ErrorCode.DEADLINE, message="the request's deadline passed")
# How far (seconds of step time) a busy engine may run ahead of the least-served busy one.
SHARE_SLACK = 0.005
# How far behind the least-served busy engine one that becomes busy starts, at most: a short
# request arriving next to long-running work (a chat during speech) is served first, up to
# this much of its engine's step time, and then the engines share by time. Never more than
# the engine was idle, so a stream of short requests cannot take more than its share.
WAKE_CREDIT = 0.05


@dataclass(slots=True)
class _Active:
    submit: Submit
    engine: Engine


# Seconds the MLX thread waits for work when it has none (a new request wakes it at once).
IDLE_WAIT = 0.1


def _never() -> bool:
    return False


class Scheduler:
    """Runs on the MLX thread until a shutdown request; see the module docstring."""

    def __init__(
        self,
        engines: Sequence[Engine],
        handoff: Handoff,
        outbox: queue.SimpleQueue,
        stats: WorkerStats,
        max_num_seqs: int,
        idle_wait: float = IDLE_WAIT,
        clock: Callable[[], float] = time.time,
        timer: Callable[[], float] = time.perf_counter,
        lockstep: Lockstep | None = None,
    ) -> None:
        self._engines = list(engines)
        self._handoff = handoff
        self._outbox = outbox
        self._stats = stats
        for engine in self._engines:  # engines that count their own work (runtime/stats.py)
            bind = getattr(engine, "bind_stats", None)
            if bind is not None:
                bind(stats)
            bind = getattr(engine, "bind_wake", None)  # engines with work off the MLX thread
            if bind is not None:
                bind(handoff.wake)
        self._max_num_seqs = max_num_seqs
        self._idle_wait = idle_wait
        self._clock = clock
        self._timer = timer  # measures steps (the clock is for deadlines)
        # A rank of a distributed group: each iteration starts from rank 0's Round
        # (worker/distributed/lockstep.py), so every rank makes the same decisions.
        self._lockstep = lockstep
        # Seconds of step time each busy engine had since it last became busy (by id), the
        # ones becoming busy next to busy ones starting behind the least served; and when
        # each engine last became idle (by id; the scheduler's start for the others).
        self._served: dict[int, float] = {}
        self._idle_since: dict[int, float] = {}
        self._started = timer()
        self._active: dict[str, _Active] = {}
        self._waiting: deque[Submit] = deque()
        self._log = RequestLog()

    def run(self) -> None:
        while self.iteration():
            pass

    def iteration(self) -> bool:
        """One pass of the loop; False once a shutdown request was served."""
        deltas: list[Delta] = []
        if self._lockstep is None:
            round_ = self._collect()
        else:
            idle = not (self._active or self._waiting)
            round_ = self._lockstep.round(lambda: self._collect(self._clock()), idle)
        shutdown: ShutdownRequest | None = None
        for item in round_.items:
            if isinstance(item, ShutdownRequest):
                shutdown = item
            elif isinstance(item, AdapterChange):
                self._outbox.put(change_adapter(self._engines, item, self._lockstep is not None))
            else:
                self._enqueue(item, deltas)
        if shutdown is not None:
            self._abort(set(self._active) | {s.request_id for s in self._waiting}, deltas)
            self._emit(deltas)
            self._outbox.put(ControlReply(call_id=shutdown.call_id, ok=True))
            return False
        self._abort(round_.aborted, deltas)
        self._expire(deltas, round_.expired)
        self._step(deltas)
        self._admit(deltas)
        self._stats.set_queue(list(self._active), len(self._waiting))
        self._emit(deltas)
        return True

    def _collect(self, now: float | None = None) -> Round:
        """This iteration's aborts and arrivals (waiting when idle); with `now`, the requests
        whose deadline passed by then too (else `_expire` reads the clock itself)."""
        # Aborts before the inbox: an abort drained now had its Submit queued before it.
        aborted = self._handoff.aborts.drain()
        idle = not (self._waiting or aborted) and self._stalled()
        items = self._handoff.take(self._idle_wait if idle else None)
        if now is None:
            return Round(aborted, items)
        expired = [s.request_id for s in self._waiting if _expired(s, now)]
        expired += [i for i, a in self._active.items() if _expired(a.submit, now)]
        return Round(aborted, items, expired)

    def _stalled(self) -> bool:
        """No active request the MLX thread can advance now: none, or only ones of engines
        that wait on work off this thread (`stalled()`; they wake the handoff when it is done)."""
        engines = {id(a.engine): a.engine for a in self._active.values()}.values()
        return all(getattr(e, "stalled", _never)() for e in engines)

    def _enqueue(self, submit: Submit, deltas: list[Delta]) -> None:
        # Field types were checked when the Submit was decoded (protocol.codec).
        self._stats.count_request()
        if submit.request_id in self._active or any(
            s.request_id == submit.request_id for s in self._waiting
        ):
            error = RequestError(f"request id {submit.request_id!r} is already in use")
            deltas.append(_terminal(submit.request_id, FinishReason.ERROR, error.info()))
            return
        self._log.arrived(submit)
        self._waiting.append(submit)

    def _abort(self, request_ids: set[str], deltas: list[Delta]) -> None:
        """Ends the named active or waiting requests with "abort"; unknown ids are finished ones."""
        if not request_ids:
            return
        for submit in [s for s in self._waiting if s.request_id in request_ids]:
            self._waiting.remove(submit)
            self._stats.count_abort()
            deltas.append(_terminal(submit.request_id, FinishReason.ABORT))
        for delta in self._end_active([i for i in request_ids if i in self._active]):
            self._stats.count_abort()
            deltas.append(delta)

    def _expire(self, deltas: list[Delta], given: list[str] | None) -> None:
        """Ends the requests whose deadline or time limit passed: by the clock, or the `given`
        ids. A deadline is an error; a time limit ends it as max_tokens would ("length")."""
        now = self._clock()
        if given is None:
            late = {s.request_id for s in self._waiting if _expired(s, now)}
            late |= {i for i, a in self._active.items() if _expired(a.submit, now)}
        else:
            late = set(given)
        for submit in [s for s in self._waiting if s.request_id in late]:
            self._waiting.remove(submit)
            if _past(submit.deadline, now):
                deltas.append(_terminal(submit.request_id, FinishReason.ERROR, _DEADLINE_ERROR))
            else:
                deltas.append(_terminal(submit.request_id, FinishReason.LENGTH))
        expired = [i for i in self._active if i in late]
        past_deadline = {i for i in expired if _past(self._active[i].submit.deadline, now)}
        for delta in self._end_active(expired):
            # The engine ended it as an abort; the client is told why.
            if delta.request_id in past_deadline:
                delta.finish_reason = FinishReason.ERROR
                delta.error = _DEADLINE_ERROR
            else:
                delta.finish_reason = FinishReason.LENGTH
            deltas.append(delta)

    def _end_active(self, request_ids: list[str]) -> list[Delta]:
        """Asks the engines to end these active requests; their terminal Deltas."""
        # Grouped before any engine runs: settling one engine's requests removes them from
        # _active, so looking them up again for the next engine would fail.
        by_engine: dict[int, list[str]] = {}
        for request_id in request_ids:
            by_engine.setdefault(id(self._active[request_id].engine), []).append(request_id)
        ended: list[Delta] = []
        for engine in self._engines:
            mine = by_engine.get(id(engine))
            if not mine:
                continue
            try:
                got = engine.abort(mine)
            except Exception as exc:
                log.exception("aborting %s failed", mine)
                got = [_terminal(i, FinishReason.ERROR, internal(exc)) for i in mine]
            ended += self._settle(got, mine)
        return ended

    def _step(self, deltas: list[Delta]) -> None:
        busy = {id(a.engine) for a in self._active.values()}
        now = self._timer()
        for key in [k for k in self._served if k not in busy]:
            del self._served[key]  # idle engines bank no time
            self._idle_since[key] = now
        engines = [e for e in self._engines if id(e) in busy]
        if self._served:  # the engines becoming busy next to busy ones start behind them
            floor = min(self._served.values())
            for engine in [e for e in engines if id(e) not in self._served]:
                idle = now - self._idle_since.get(id(engine), self._started)
                self._served[id(engine)] = floor - min(WAKE_CREDIT, idle)
        else:
            self._served = dict.fromkeys(map(id, engines), 0.0)
        turn = min((self._served[id(e)] for e in engines), default=0.0) + SHARE_SLACK
        for engine in engines:
            if self._served[id(engine)] > turn:
                continue  # ahead of the others: their turn
            mine = [i for i, a in self._active.items() if a.engine is engine]
            started = self._timer()
            try:
                produced = engine.step()
            except Exception as exc:  # the engine broke its promise; its requests end here
                if self._lockstep is not None:
                    raise  # the group cannot step on (the module's docstring)
                log.exception("an engine step failed")
                produced = engine_failed(engine, mine, exc)
            self._served[id(engine)] += self._timer() - started
            for delta in produced:
                self._stats.count_tokens(generated=len(delta.token_ids))
                if delta.finish_reason is not None:
                    self._finished(delta)
                deltas.append(delta)

    def _admit(self, deltas: list[Delta]) -> None:
        """Starts waiting requests while there is room; each gets its accepted Delta."""
        while self._waiting and len(self._active) < self._max_num_seqs:
            submit = self._waiting.popleft()
            engine = self._route(submit.op)
            if engine is None:
                ops = ", ".join(sorted({op for e in self._engines for op in e.ops}))
                error = bad_request(
                    f"operation {submit.op!r} is not supported by this model ({ops})"
                )
                deltas.append(_terminal(submit.request_id, FinishReason.ERROR, error.info()))
                continue
            if submit.adapter is not None and getattr(engine, "adapters", None) is None:
                error = bad_request(f"this model serves no LoRA adapters ({submit.adapter!r})")
                deltas.append(_terminal(submit.request_id, FinishReason.ERROR, error.info()))
                continue
            try:
                delta = engine.admit(submit)
            except Exception as exc:
                log.exception(
                    "request %s could not start", submit.request_id, extra=named(submit.request_id)
                )
                delta = _terminal(submit.request_id, FinishReason.ERROR, internal(exc))
            if delta.finish_reason is None:
                self._active[submit.request_id] = _Active(submit, engine)
            deltas.append(delta)

    def _route(self, op: object) -> Engine | None:
        return next((e for e in self._engines if op in e.ops), None)

    def _settle(self, got: list[Delta], request_ids: list[str]) -> list[Delta]:
        """Every id in `request_ids` ends exactly once, whatever the engine returned."""
        ended = {d.request_id for d in got if d.finish_reason is not None}
        got += [
            _terminal(i, FinishReason.ERROR, ErrorInfo(ErrorCode.INTERNAL, "lost by its engine"))
            for i in request_ids
            if i not in ended
        ]
        for delta in got:
            if delta.finish_reason is not None:
                self._finished(delta)
        return got

    def _finished(self, delta: Delta) -> None:
        if self._active.pop(delta.request_id, None) is not None and delta.usage is not None:
            self._stats.count_tokens(prompt=delta.usage.prompt_tokens)

    def _emit(self, deltas: list[Delta]) -> None:
        if deltas:
            for delta in deltas:
                if delta.finish_reason is not None:
                    self._log.ended(delta)
            self._outbox.put(Step(deltas=deltas))


def engine_failed(engine: Engine, request_ids: list[str], exc: Exception) -> list[Delta]:
    """Terminal internal errors for the requests of an engine whose step raised."""
    try:
        ended = engine.abort(request_ids)
    except Exception:
        ended = []
    usage = {d.request_id: d.usage for d in ended}
    return [
        _terminal(i, FinishReason.ERROR, internal(exc), usage.get(i) or Usage(0, 0))
        for i in request_ids
    ]


def _expired(submit: Submit, now: float) -> bool:
    return _past(submit.deadline, now) or _past(submit.time_limit, now)


def _past(moment: float | None, now: float) -> bool:
    return moment is not None and now > moment


def _terminal(
    request_id: str,
    reason: FinishReason,
    error: ErrorInfo | None = None,
    usage: Usage | None = None,
) -> Delta:
    return Delta(request_id, finish_reason=reason, usage=usage or Usage(0, 0), error=error)
