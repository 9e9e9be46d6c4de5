"""Work that runs on the MLX thread a piece at a time: a greenlet that hands the thread back
at each `pause()`, resumed by its engine between the engine's other work.

The engines that drive a library's own loop (the image pipelines' denoising, mlx-vlm's
prefill) put that loop in a `PausedRun` and let a module the loop calls pause it; the loop is
the library's, call for call, so a paused run computes exactly what a direct call does.
"""

from __future__ import annotations

from typing import Any

import greenlet


class PausedRun(greenlet.greenlet):
    """A greenlet resumed by `resume()` (on the caller's thread) and paused by `pause()`."""

    @classmethod
    def current(cls) -> Any:
        """The run of this class the caller is inside, else None (a direct library call)."""
        run = greenlet.getcurrent()
        return run if isinstance(run, cls) else None

    def pause(self, value: Any = None) -> None:
        """Called inside the run: give the thread back to whoever resumed it."""
        self.parent.switch(value)

    def resume(self) -> Any:
        """Runs to the next pause (its value) or the end (the work's result; then `dead`);
        an exception of the work is raised here."""
        self.parent = greenlet.getcurrent()
        return self.switch()

    def stop(self) -> None:
        """Ends a started run where it is paused: its frames unwound, their arrays freed."""
        if self and not self.dead:
            self.throw(greenlet.GreenletExit)
