"""The gateway's video jobs (gateway/api/videos/jobs.py), without a worker: a job's object
through its life, its clip kept an hour after it finished, the store bounded by count and by
clip bytes (the oldest finished jobs go first), a 503 when as many jobs as are kept are
unfinished, and deleting a running job cancels its work."""

from __future__ import annotations

import asyncio

import pytest

from gateway.api.videos import jobs as jobs_module
from gateway.api.videos.jobs import KEEP_SECONDS, VideoJobs
from gateway.http.errors import APIError
from gateway.workers.errors import QueueFull
from protocol.messages import VideoOut


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def clip(size: int = 10) -> VideoOut:
    return VideoOut(b"\0" * size, 32, 32, 124, 24.0, 1, b"\0" * 32 * 32 * 3)


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_job_goes_from_queued_to_completed_and_expires_an_hour_later():
    async def main():
        clock = Clock()
        store = VideoJobs(clock)
        release = asyncio.Event()

        async def work(job):
            job.status, job.progress = "in_progress", 0.5
            await release.wait()
            store.complete(job, clip())

        job = store.start("h3", "a fox", "32x32", "5", work)
        assert job.resource()["status"] == "queued" and job.resource()["progress"] == 0
        await asyncio.sleep(0)
        assert (job.status, job.resource()["progress"]) == ("in_progress", 50)
        release.set()
        await job.task
        clock.now += 5
        video = store.get(job.id).resource()
        assert (video["status"], video["progress"], video["error"]) == ("completed", 100, None)
        assert video["expires_at"] == video["completed_at"] + KEEP_SECONDS
        clock.now += KEEP_SECONDS
        assert store.get(job.id) is None and store.listed("desc") == []

    run(main())


def test_a_failure_is_the_jobs_error_and_work_that_ends_without_a_clip_fails():
    async def main():
        store = VideoJobs(Clock())

        async def refused(job):
            raise APIError(400, "prompt: 5000 tokens, over the 4096", code="bad_request")

        async def silent(job):
            return None

        failed = store.start("h3", "x", "32x32", "5", refused)
        ended = store.start("h3", "x", "32x32", "5", silent)
        await asyncio.gather(failed.task, ended.task)
        assert failed.resource()["error"] == {
            "code": "bad_request", "message": "prompt: 5000 tokens, over the 4096",
        }  # fmt: skip
        assert ended.status == "failed" and ended.error is not None

    run(main())


def test_deleting_a_running_job_cancels_its_work():
    async def main():
        store = VideoJobs(Clock())
        cancelled = asyncio.Event()

        async def forever(job):
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise

        job = store.start("h3", "x", "32x32", "5", forever)
        await asyncio.sleep(0)
        assert await store.delete(job.id) is job
        assert cancelled.is_set() and store.get(job.id) is None
        assert await store.delete(job.id) is None

    run(main())


def test_the_store_keeps_at_most_max_jobs_and_max_clip_bytes_dropping_the_oldest_finished(
    monkeypatch,
):
    monkeypatch.setattr(jobs_module, "MAX_JOBS", 3)
    each = len(clip(10).mp4) + len(clip(10).first_frame)  # its first frame counts too
    monkeypatch.setattr(jobs_module, "MAX_CLIP_BYTES", 2 * each + 1)

    async def main():
        store = VideoJobs(Clock())

        async def done(job):
            store.complete(job, clip(10))

        released = 0

        def release():
            nonlocal released
            released += 1

        made = [store.start("h3", "x", "32x32", "5", done, release) for _ in range(3)]
        await asyncio.gather(*(j.task for j in made))
        # Three clips are over the bound: the oldest finished job went.
        assert [j.id for j in store.listed("asc")] == [made[1].id, made[2].id]
        hold = asyncio.Event()

        async def waiting(job):
            await hold.wait()

        running = [store.start("h3", "x", "32x32", "5", waiting, release) for _ in range(3)]
        # Unfinished jobs are never dropped: the finished ones made room for them.
        assert [j.id for j in store.listed("asc")] == [j.id for j in running]
        with pytest.raises(QueueFull):
            store.start("h3", "x", "32x32", "5", waiting)
        await store.close()
        assert all(j.status == "failed" for j in running)
        assert released == 6  # every job's leases ended, those cancelled before they ran too

    run(main())


class Engine:
    """A stand-in engine: only what `VideoJobs.turn` reads."""

    def __init__(self, max_num_seqs: int) -> None:
        self.max_num_seqs = max_num_seqs

    def queue_stats(self) -> dict[str, int]:
        return {"max_num_seqs": self.max_num_seqs}


@pytest.mark.parametrize("max_num_seqs, at_once", [(8, 2), (1, 1)])
def test_turns_let_in_flight_jobs_at_an_engine_in_arrival_order_and_a_deleted_waiter_leaves(
    max_num_seqs, at_once
):
    async def main():
        store = VideoJobs(Clock())
        engine = Engine(max_num_seqs)
        running: list[str] = []
        done = {name: asyncio.Event() for name in "abcd"}

        def work(name):
            async def job_work(job):
                async with store.turn(engine):
                    running.append(name)
                    await done[name].wait()
                    store.complete(job, clip())

            return job_work

        jobs = {name: store.start("h3", name, "32x32", "5", work(name)) for name in "abcd"}
        await asyncio.sleep(0.01)
        assert running == list("abcd"[:at_once])
        waiting = "abcd"[at_once]
        await store.delete(jobs[waiting].id)  # cancelled while it waits for its turn
        assert jobs[waiting].status == "failed"
        for name in "abcd"[:at_once]:
            done[name].set()
        await asyncio.sleep(0.01)
        assert running == [n for n in "abcd" if n != waiting][: 2 * at_once]
        for event in done.values():
            event.set()
        await asyncio.gather(*(j.task for n, j in jobs.items() if n != waiting))
        assert [n for n in "abcd" if n != waiting] == running

    run(main())
