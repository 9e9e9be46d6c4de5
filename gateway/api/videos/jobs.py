"""The video jobs of this gateway: what `GET /v1/videos/{id}` reports and where the clip waits.

A job is made by `POST /v1/videos` and runs as a task of the gateway's event loop: one worker
request (streamed, so each denoising step moves `progress`), its clip kept in memory once
made. A worker is sent at most `IN_FLIGHT` jobs at once (one denoising, one being written to
MP4), fewer where it generates fewer requests at once (`max_num_seqs`); the others wait here, `queued`, so they hold none of the worker's admission slots (which
chat beside them needs) and no admission timeout runs out on them. Jobs live in the gateway
process, bounded three ways: at most `MAX_JOBS` (the oldest finished ones go first), clips of
at most `MAX_CLIP_BYTES` all together (likewise), and a finished job's clip for `KEEP_SECONDS`
after it completed (`expires_at`); a job that expired is forgotten. Deleting a job that runs
aborts its worker request between two steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.http import errors
from gateway.http.errors import APIError
from gateway.workers.errors import QueueFull
from protocol.messages import VideoOut

log = logging.getLogger("gateway.videos")

MAX_JOBS = 256
MAX_CLIP_BYTES = 1 << 30
KEEP_SECONDS = 3600
RETRY_AFTER = 5.0  # seconds a client refused for too many jobs waits
IN_FLIGHT = 2  # jobs sent to one worker at once


_CANCELLED = APIError(503, "The video job was cancelled: the server stopped", code="cancelled")


@dataclass
class Job:
    id: str
    model: str
    prompt: str
    size: str  # WIDTHxHEIGHT
    seconds: str  # as asked for
    created_at: int
    seed: int | None = None  # as asked for; the worker's once the clip is made
    status: str = "queued"  # queued, in_progress, completed, failed
    progress: float = 0.0  # 0 to 1
    completed_at: int | None = None
    error: dict[str, str] | None = None
    clip: VideoOut | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    release: Callable[[], None] | None = field(default=None, repr=False)  # at its end, once

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "failed")

    @property
    def expires_at(self) -> int | None:
        return None if self.completed_at is None else self.completed_at + KEEP_SECONDS

    def resource(self) -> dict[str, Any]:
        """OpenAI's video object."""
        return {
            "id": self.id,
            "object": "video",
            "model": self.model,
            "status": self.status,
            "progress": round(100 * self.progress),
            "created_at": self.created_at,
            "completed_at": self.completed_at,
            "expires_at": self.expires_at,
            "prompt": self.prompt,
            "size": self.size,
            "seconds": self.seconds,
            "remixed_from_video_id": None,
            "error": self.error,
            # Not an OpenAI field: the seed the clip is made with (the worker's, if unset).
            "seed": self.seed if self.clip is None else self.clip.seed,
        }

    def end(self) -> None:
        """Runs `release` (the pool's leases it held) the first time only."""
        release, self.release = self.release, None
        if release is not None:
            release()


class VideoJobs:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._jobs: OrderedDict[str, Job] = OrderedDict()  # oldest first
        # Per engine (forgotten with it): what its jobs hold while their request is open.
        self._turns: weakref.WeakKeyDictionary[object, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def turn(self, engine: object) -> asyncio.Semaphore:
        """What a job holds while its worker request is open: `IN_FLIGHT` per engine, or the
        engine's `max_num_seqs` where that is fewer (the jobs past it would wait in its
        admission queue, where a timeout runs; here none does)."""
        turn = self._turns.get(engine)
        if turn is None:
            queue_stats = getattr(engine, "queue_stats", None)
            capacity = IN_FLIGHT if queue_stats is None else queue_stats()["max_num_seqs"]
            turn = self._turns[engine] = asyncio.Semaphore(max(1, min(IN_FLIGHT, capacity)))
        return turn

    def start(
        self,
        model: str,
        prompt: str,
        size: str,
        seconds: str,
        work: Callable[[Job], Awaitable[None]],
        release: Callable[[], None] | None = None,
        seed: int | None = None,
    ) -> Job:
        """A new job, `work(job)` running as a task; older jobs make room first. QueueFull
        (a 503) when MAX_JOBS jobs are unfinished."""
        self._forget_expired()
        if sum(not j.finished for j in self._jobs.values()) >= MAX_JOBS:
            raise QueueFull(f"{MAX_JOBS} video jobs are queued or running", RETRY_AFTER)
        job = Job(f"video_{uuid.uuid4().hex}", model, prompt, size, seconds, self._now(), seed)
        job.release = release
        self._jobs[job.id] = job
        job.task = asyncio.get_running_loop().create_task(self._run(job, work))
        self._make_room()
        return job

    def get(self, job_id: str) -> Job | None:
        self._forget_expired()
        return self._jobs.get(job_id)

    def listed(self, order: str) -> list[Job]:
        self._forget_expired()
        jobs = list(self._jobs.values())
        return jobs if order == "asc" else jobs[::-1]

    async def delete(self, job_id: str) -> Job | None:
        """Forgets the job; one still running is cancelled (its worker request aborted)."""
        job = self._jobs.pop(job_id, None)
        if job is not None and job.task is not None and not job.task.done():
            job.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await job.task
        if job is not None:
            job.end()  # (a task cancelled before it began ran no `finally`)
        return job

    async def close(self) -> None:
        """Cancels every unfinished job (the gateway is stopping); each one failed."""
        tasks = [j.task for j in self._jobs.values() if j.task is not None and not j.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for job in self._jobs.values():
            if not job.finished:  # (a task cancelled before it began ran no handler)
                self.fail(job, _CANCELLED)
            job.end()

    async def _run(self, job: Job, work: Callable[[Job], Awaitable[None]]) -> None:
        try:
            await work(job)
        except APIError as exc:
            self.fail(job, exc)
        except asyncio.CancelledError:
            if not job.finished:
                self.fail(job, _CANCELLED)
            raise
        except Exception as exc:
            self.fail(job, errors.as_api_error(exc, log, "video job"))
        else:
            if not job.finished:
                self.fail(job, errors.no_terminal("video request"))
        finally:
            job.end()
            self._make_room()

    def complete(self, job: Job, clip: VideoOut) -> None:
        job.clip, job.progress, job.status = clip, 1.0, "completed"
        job.completed_at = self._now()

    def fail(self, job: Job, error: APIError) -> None:
        job.status, job.completed_at = "failed", self._now()
        job.error = {"code": error.code or error.type, "message": error.message}

    def _now(self) -> int:
        return int(self._clock())

    def _forget_expired(self) -> None:
        now = self._now()
        for job in list(self._jobs.values()):
            if job.expires_at is not None and job.expires_at <= now:
                del self._jobs[job.id]

    def _make_room(self) -> None:
        """Past MAX_JOBS jobs or MAX_CLIP_BYTES of clips, the oldest finished jobs go."""
        while True:
            finished = [j for j in self._jobs.values() if j.finished]
            clip_bytes = sum(
                len(j.clip.mp4) + len(j.clip.first_frame) for j in finished if j.clip is not None
            )
            if not finished or (len(self._jobs) <= MAX_JOBS and clip_bytes <= MAX_CLIP_BYTES):
                return
            del self._jobs[finished[0].id]
