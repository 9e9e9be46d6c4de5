"""The engine's error policy in a few exceptions: unavailable (retry later), queue full, swap
failed, and a control call the worker rejected.

The HTTP layer maps EngineUnavailable (and its QueueFull subclass) to 503 with Retry-After, and
SwapFailed to an error reply of the model-management endpoint. Request-scoped failures never
raise: they arrive as the request's terminal Delta with an ErrorInfo.
"""

from __future__ import annotations


class EngineUnavailable(Exception):
    """No worker can take the request now: failed or stopped, or none became ready (starting,
    restarting, swapping) within the queue timeout."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class QueueFull(EngineUnavailable):
    """The bounded admission queue is full."""


class SwapFailed(Exception):
    """The new model did not come up. `restored` says whether the previous model serves again."""

    def __init__(self, message: str, restored: bool) -> None:
        super().__init__(message)
        self.message = message
        self.restored = restored


class WorkerRejected(Exception):
    """The worker refused a control call's input (e.g. count_tokens on messages its chat
    template rejects); the message says why."""


class LaunchError(Exception):
    """A worker could not be started (the supervisor's LaunchFailure): `retry` False when the
    same attempt would fail the same way (a missing executable, a refused key)."""

    def __init__(self, message: str, retry: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.retry = retry
