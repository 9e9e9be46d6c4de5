"""A denoising loop paused between its steps, on the MLX thread, without changing a number.

mlx-vlm's image pipelines run their whole denoising loop inside one call
(`model.generate(request)`). The worker's engines must do one bounded unit of work per step so
that aborts, deadlines and the other engines' requests get the thread between units. Rather
than rewrite each family's loop, the pipeline's denoising transformer is replaced by a
`PacedDenoiser`, and each picture's generation runs in a `Run` (worker/runtime/paused_run.py,
a greenlet on the same thread): every call of the denoiser first hands control back to the
engine, which resumes the run at its next step (or drops it, on an abort). The computation is
the library's own, call for call, so a paused run makes exactly the pixels a direct call makes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from worker.runtime.paused_run import PausedRun


class Run(PausedRun):
    """One picture's generation: `work()` run a denoiser call at a time by `advance()`."""

    def __init__(self, work: Callable[[], Any]) -> None:
        super().__init__(run=work)
        self.latents: Any = None  # what the paused denoiser call starts from
        self.steps = 0  # denoising steps begun (a step may call the denoiser more than once)
        self.result: Any = None
        self._new_step = False
        self._spent = 0.0  # time inside advance() since the current step began
        self.step_seconds: list[float] = []  # each finished step's time, drained by the engine

    def pause(self, latents: Any = None) -> None:
        """Called by the denoiser inside the run, with the latents its call starts from: give
        the thread back until resumed."""
        self._new_step = latents is not self.latents
        self.latents = latents
        if self._new_step:
            self.steps += 1
        super().pause()

    def advance(self) -> bool:
        """Runs to the next denoiser call (True: a new step starts there) or to the end
        (then `dead` and `result` set); an exception of the work is raised here."""
        began = time.perf_counter()
        self._new_step = False
        value = self.resume()
        self._spent += time.perf_counter() - began
        if self.dead:
            self.result = value
            if self.steps:  # the last step, and the decoding of its latents
                self.step_seconds.append(self._spent)
            return False
        if self._new_step:
            if self.steps > 1:  # the previous step ends where this one starts
                self.step_seconds.append(self._spent)
            self._spent = 0.0  # (before the first step: the prompt's encoding, not a step)
        return self._new_step


class PacedDenoiser:
    """Stands in for a pipeline's denoising transformer: called inside a `Run`, it pauses the
    run first; called anywhere else (a direct call of the library), it is the transformer."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        run = Run.current()
        if run is not None:
            run.pause(args[0] if args else next(iter(kwargs.values())))
        return self.inner(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
