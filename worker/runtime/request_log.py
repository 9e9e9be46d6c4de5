"""One log line per request as it ends (and one as it arrives, at debug), each carrying its id.

The id named is the HTTP request's (`Submit.http_request_id`, the gateway's `x-request-id`),
so one id finds a request in both processes' logs; a Submit without one is named by its worker
request id. Written by the MLX thread, from what the scheduler already holds: no work per token.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from protocol.messages import Delta, FinishReason, Submit

log = logging.getLogger("worker.requests")

# Worker request id -> the id its log lines name, while it runs (the MLX thread's own).
_NAMES: dict[str, str] = {}
# Worker request id -> what its engine adds to the line written as it ends (e.g. speculation's
# acceptance); set by the engine before it returns the terminal delta.
_NOTES: dict[str, str] = {}


def note(request_id: str, text: str) -> None:
    """Adds `text` to the line logged when the request ends (the MLX thread's own)."""
    _NOTES[request_id] = text


def named(request_id: str) -> dict[str, str]:
    """`extra=` for any worker log line about a request: it then carries the request's HTTP
    id, as the line written when it ends does."""
    return {"request_id": _NAMES.get(request_id, request_id)}


class RequestLog:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        # worker request id -> (op, the id logged, arrival)
        self._started: dict[str, tuple[str, str, float | None]] = {}

    def arrived(self, submit: Submit) -> None:
        name = submit.http_request_id or submit.request_id
        self._started[submit.request_id] = (str(submit.op), name, self._clock())
        _NAMES[submit.request_id] = name
        log.debug("%s request queued", submit.op, extra={"request_id": name})

    def ended(self, delta: Delta) -> None:
        """Call with a terminal delta."""
        started = self._started.pop(delta.request_id, None)
        _NAMES.pop(delta.request_id, None)
        noted = _NOTES.pop(delta.request_id, "")
        op, name, arrival = started or ("?", delta.request_id, None)
        seconds = "" if arrival is None else f" in {self._clock() - arrival:.3f}s"
        usage = delta.usage
        tokens = f" prompt={usage.prompt_tokens} output={usage.completion_tokens}" if usage else ""
        if usage is not None and usage.cached_tokens:
            tokens += f" cached={usage.cached_tokens}"
        tokens += noted
        extra = {"request_id": name}
        reason = str(delta.finish_reason)
        if delta.finish_reason == FinishReason.ERROR and delta.error is not None:
            error = f"{delta.error.code}: {delta.error.message}"
            log.warning("%s request failed (%s)%s%s", op, error, tokens, seconds, extra=extra)
        else:
            log.info("%s request finished (%s)%s%s", op, reason, tokens, seconds, extra=extra)
