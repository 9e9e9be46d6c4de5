"""The interface every modality engine in the worker implements (text, speech out, speech in).

The worker's MLX thread owns one engine per loaded modality and, each iteration, routes new
Submits to the engine that serves their `op`, applies aborts, calls `step()` on the engines
with work whose turn it is (they take turns by measured step time: worker/runtime/scheduler.py),
and sends all the deltas of that iteration in one Step message. Engines run only
on the MLX thread. Invariants each engine keeps:
- `admit` returns the request's empty "accepted" Delta, or its terminal error Delta when the
  input is bad (RequestError -> ErrorCode.BAD_REQUEST); nothing else;
- every admitted request later gets exactly one terminal Delta (from `step` or `abort`),
  carrying `usage` (for audio: prompt_tokens = input characters or audio seconds rounded up,
  completion_tokens = generated tokens / frames; say which in the engine's docstring);
- `step` does one bounded unit of work for every active request (a decode step, a few audio
  frames, one ASR window), so aborts take effect between units;
- `abort` ends the named requests it knows with finish_reason "abort" and ignores the rest.
An engine may also have `bind_stats(stats)`: the scheduler calls it with the worker's
`WorkerStats`, for the counts only the engine can make (worker/runtime/stats.py). An engine
whose requests wait on work off the MLX thread (the video engine's MP4 encoding) has
`bind_wake(wake)` and `stalled()`: while `stalled()` is true the scheduler does not spin on it
but waits for the inbox, and the engine calls `wake()` (any thread) once a step would get on.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from protocol.inputs import Op
from protocol.messages import Delta, Submit
from protocol.ready import Capability, SpeechInfo, TextInfo, TranscriptionInfo

EngineInfo = TextInfo | SpeechInfo | TranscriptionInfo


class Engine(Protocol):
    ops: frozenset[Op]  # the Submit ops it serves (the types of inputs it takes)

    def admit(self, submit: Submit) -> Delta: ...

    def step(self) -> list[Delta]: ...

    def abort(self, request_ids: Iterable[str]) -> list[Delta]: ...

    def active_ids(self) -> list[str]: ...

    def capabilities(self) -> list[Capability]: ...  # its share of Ready.capabilities

    def ready_info(self) -> EngineInfo: ...  # its section of Ready (text, speech, ...)
