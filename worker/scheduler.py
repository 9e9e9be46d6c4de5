"""The MLX thread's loop: admit, abort, expire and advance requests; one Step per iteration.

Foundation version (continuous batching comes later): up to `max_num_seqs` requests are
active, each with its own generator and KV cache, advanced by one token each per iteration in
round-robin order; the rest wait in FIFO order. Invariants:
- every Submit gets exactly one terminal Delta, and it carries usage;
- a request's first Delta is an empty "accepted" Delta, sent before its prefill starts;
- all deltas of one iteration travel in one Step message (none when nothing happened).
"""

from __future__ import annotations

import logging
import queue
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

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
from worker.errors import RequestError
from worker.handoff import Handoff, ShutdownRequest
from worker.stats import WorkerStats

log = logging.getLogger(__name__)


class TokenStepLike(Protocol):
    text: str
    token_ids: list[int]
    finish_reason: str | None


class Generation(Protocol):
    """One request's generation state (worker.text_engine.TextGeneration for text)."""

    prompt_tokens: int
    completion_tokens: int

    def advance(self) -> TokenStepLike: ...

    def close(self) -> None: ...


# Builds a request's Generation (validating and tokenizing it); the callback may raise
# PrefillInterrupted between prefill chunks.
StartFn = Callable[[Submit, Callable[[int, int], None]], Generation]


class PrefillInterrupted(Exception):
    """Raised from the prefill progress callback to stop a prefill (abort, deadline)."""

    def __init__(self, finish_reason: str, error: ErrorInfo | None = None) -> None:
        super().__init__(finish_reason)
        self.finish_reason = finish_reason
        self.error = error


_DEADLINE_ERROR = ErrorInfo(code=ErrorCode.DEADLINE, message="the request's deadline passed")


@dataclass(slots=True)
class _Active:
    submit: Submit
    generation: Generation


class Scheduler:
    """Runs on the MLX thread until a shutdown request; see the module docstring."""

    def __init__(
        self,
        start: StartFn,
        handoff: Handoff,
        outbox: queue.SimpleQueue,
        stats: WorkerStats,
        max_num_seqs: int,
        idle_wait: float = 0.1,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._start = start
        self._handoff = handoff
        self._outbox = outbox
        self._stats = stats
        self._max_num_seqs = max_num_seqs
        self._idle_wait = idle_wait
        self._clock = clock
        self._active: list[_Active] = []
        self._waiting: deque[Submit] = deque()

    def run(self) -> None:
        while self.iteration():
            pass

    def iteration(self) -> bool:
        """One pass of the loop; False once a shutdown request was served."""
        deltas: list[Delta] = []
        # Aborts before the inbox: an abort drained now had its Submit queued before it.
        aborted = self._handoff.aborts.drain()
        idle = not (self._active or self._waiting or aborted)
        shutdown: ShutdownRequest | None = None
        for item in self._handoff.take(self._idle_wait if idle else None):
            if isinstance(item, ShutdownRequest):
                shutdown = item
            else:
                self._enqueue(item, deltas)
        if shutdown is not None:
            self._abort(
                {a.submit.request_id for a in self._active} | {s.request_id for s in self._waiting},
                deltas,
            )
            self._emit(deltas)
            self._outbox.put(ControlReply(call_id=shutdown.call_id, ok=True))
            return False
        self._abort(aborted, deltas)
        self._expire(deltas)
        self._advance(deltas)
        self._admit(deltas)
        self._stats.set_queue([a.submit.request_id for a in self._active], len(self._waiting))
        self._emit(deltas)
        return True

    def _enqueue(self, submit: Submit, deltas: list[Delta]) -> None:
        if not isinstance(submit.request_id, str):
            log.error("dropping a Submit whose request id is not a string: %r", submit.request_id)
            return
        self._stats.count_request()
        deadline = submit.deadline
        if deadline is not None and (
            isinstance(deadline, bool) or not isinstance(deadline, (int, float))
        ):
            error = RequestError(f"deadline must be a number, got {deadline!r}")
            deltas.append(
                _terminal(submit.request_id, FinishReason.ERROR, Usage(0, 0), error.info())
            )
            return
        known = {a.submit.request_id for a in self._active} | {s.request_id for s in self._waiting}
        if submit.request_id in known:
            error = RequestError(f"request id {submit.request_id!r} is already in use")
            deltas.append(
                _terminal(submit.request_id, FinishReason.ERROR, Usage(0, 0), error.info())
            )
            return
        self._waiting.append(submit)

    def _abort(self, request_ids: set[str], deltas: list[Delta]) -> None:
        """Ends the named active or waiting requests with "abort"; unknown ids are finished ones."""
        if not request_ids:
            return
        for active in [a for a in self._active if a.submit.request_id in request_ids]:
            self._finish(active, FinishReason.ABORT, deltas)
        for submit in [s for s in self._waiting if s.request_id in request_ids]:
            self._waiting.remove(submit)
            self._stats.count_abort()
            deltas.append(_terminal(submit.request_id, FinishReason.ABORT, Usage(0, 0)))

    def _expire(self, deltas: list[Delta]) -> None:
        now = self._clock()
        for active in [a for a in self._active if _expired(a.submit, now)]:
            self._finish(active, FinishReason.ERROR, deltas, _DEADLINE_ERROR)
        for submit in [s for s in self._waiting if _expired(s, now)]:
            self._waiting.remove(submit)
            deltas.append(
                _terminal(submit.request_id, FinishReason.ERROR, Usage(0, 0), _DEADLINE_ERROR)
            )

    def _advance(self, deltas: list[Delta]) -> None:
        """One token for every active request, in admission order."""
        for active in list(self._active):
            request_id = active.submit.request_id
            try:
                step = active.generation.advance()
            except PrefillInterrupted as stop:
                self._finish(active, stop.finish_reason, deltas, stop.error)
                continue
            except RequestError as exc:
                self._finish(active, FinishReason.ERROR, deltas, exc.info())
                continue
            except Exception as exc:
                log.exception("request %s failed", request_id)
                error = ErrorInfo(ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}")
                self._finish(active, FinishReason.ERROR, deltas, error)
                continue
            self._stats.count_tokens(generated=len(step.token_ids))
            delta = Delta(request_id, text=step.text, token_ids=list(step.token_ids))
            if step.finish_reason is not None:
                self._active.remove(active)
                delta.finish_reason = step.finish_reason
                delta.usage = _usage(active.generation)
            deltas.append(delta)

    def _admit(self, deltas: list[Delta]) -> None:
        """Starts waiting requests while there is room; each gets its empty "accepted" Delta."""
        while self._waiting and len(self._active) < self._max_num_seqs:
            submit = self._waiting.popleft()
            try:
                generation = self._start(submit, self._prefill_guard(submit))
            except RequestError as exc:
                deltas.append(
                    _terminal(submit.request_id, FinishReason.ERROR, Usage(0, 0), exc.info())
                )
                continue
            except Exception as exc:
                log.exception("request %s could not start", submit.request_id)
                error = ErrorInfo(ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}")
                deltas.append(_terminal(submit.request_id, FinishReason.ERROR, Usage(0, 0), error))
                continue
            self._stats.count_tokens(prompt=generation.prompt_tokens)
            self._active.append(_Active(submit, generation))
            deltas.append(Delta(submit.request_id))

    def _prefill_guard(self, submit: Submit) -> Callable[[int, int], None]:
        """The callback mlx-lm calls between prefill chunks: stops a prefill that must end."""
        request_id, deadline = submit.request_id, submit.deadline

        def check(_processed: int, _total: int) -> None:
            if self._handoff.shutdown.is_set() or request_id in self._handoff.aborts:
                raise PrefillInterrupted(FinishReason.ABORT)
            if deadline is not None and self._clock() > deadline:
                raise PrefillInterrupted(FinishReason.ERROR, _DEADLINE_ERROR)

        return check

    def _finish(
        self,
        active: _Active,
        reason: str,
        deltas: list[Delta],
        error: ErrorInfo | None = None,
    ) -> None:
        self._active.remove(active)
        try:
            active.generation.close()
        except Exception:
            log.exception("closing request %s failed", active.submit.request_id)
        if reason == FinishReason.ABORT:
            self._stats.count_abort()
        deltas.append(_terminal(active.submit.request_id, reason, _usage(active.generation), error))

    def _emit(self, deltas: list[Delta]) -> None:
        if deltas:
            self._outbox.put(Step(deltas=deltas))


def _expired(submit: Submit, now: float) -> bool:
    return submit.deadline is not None and now > submit.deadline


def _usage(generation: Generation) -> Usage:
    return Usage(generation.prompt_tokens, generation.completion_tokens)


def _terminal(request_id: str, reason: str, usage: Usage, error: ErrorInfo | None = None) -> Delta:
    return Delta(request_id, finish_reason=reason, usage=usage, error=error)
