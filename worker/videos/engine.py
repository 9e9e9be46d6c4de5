"""Video out on mlx-vlm: a prompt -> a clip with sound, implementing
`worker.runtime.engine.Engine`.

Each clip is one call of mlx-vlm's `generate_video` on the loaded model, run in a `Run`
(worker/images/paced.py) that pauses at every call of the denoising transformer: `step()`
resumes the clip's run once, so one denoising step runs per worker iteration and aborts,
deadlines and the other engines' requests get the thread between any two steps (not inside the
first unit, the prompt's encoding and the AdaLN tables of a new schedule, nor the last, the two
VAEs' decoding: on a full-size model each may hold the thread for seconds). One clip is
denoised at a time (the pipeline's schedulers keep the running clip's state); the others wait
in arrival order. The frames and sound are what `generate_video` makes directly with that
seed; they are written to MP4 by mlx-vlm's own `save_video` (the `ffmpeg` program) on a thread
of its own while the MLX thread goes on (the next clip denoises meanwhile), so the file is byte
for byte the one `VideoGenerationResult.save` writes.

A running clip reports its progress (`Delta.progress`, the fraction of its denoising steps
done) as each step ends; the terminal delta carries the clip (`Delta.video`) and the usage:
prompt_tokens = the prompt's tokens as the conditioner reads them, completion_tokens = the
denoising steps run.
"""

from __future__ import annotations

import logging
import math
import random
import shutil
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from protocol.inputs import MAX_SEED, Op, VideoInputs
from protocol.messages import Delta, ErrorInfo, FinishReason, Submit, Usage, VideoOut
from protocol.ready import Capability, VideoInfo
from worker.images.paced import Run
from worker.runtime.errors import RequestError, bad_request, internal
from worker.runtime.request_log import named
from worker.videos.model import MAX_STEPS, VideoModel, fits

log = logging.getLogger(__name__)

# The share of a clip's progress its denoising steps make (the rest: decoding and encoding).
DENOISING_SHARE = 0.9


@dataclass
class _Job:
    submit: Submit
    inputs: VideoInputs
    seed: int
    steps: int  # asked for (the model's default when unset)
    frames: int
    prompt_tokens: int
    run: Run | None = None
    denoised: int = 0  # denoising steps done
    denoising: int = 0  # of how many (known once the loop starts)
    sent: float | None = None  # the last progress sent
    clip: dict[str, Any] | None = None  # the decoded clip's facts, while it is encoded
    encoding: Future[bytes] | None = None

    def progress(self) -> float:
        if self.clip is not None:
            return DENOISING_SHARE
        return DENOISING_SHARE * self.denoised / self.denoising if self.denoising else 0.0

    def report(self, phase: str, completed: int, total: int, frames: int | None) -> None:
        """mlx-vlm's progress callback, called inside the run."""
        if phase == "denoise":
            self.denoised, self.denoising = completed, total

    def close(self) -> None:
        if self.run is not None:
            self.run.stop()
            self.run = None
        if self.encoding is not None:  # one under way finishes; its file is removed there
            self.encoding.cancel()
            self.encoding = None


class VideoEngine:
    ops = frozenset({Op.VIDEO})

    def __init__(self, model: VideoModel) -> None:
        if shutil.which("ffmpeg") is None:
            raise ValueError("video generation writes MP4 with the ffmpeg program: install it")
        self.model = model
        self._jobs: dict[str, _Job] = {}  # in arrival order; the first is the one made
        self._encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="video-encode")
        self._stats: Any = None
        self._wake: Callable[[], None] = _nothing

    def bind_stats(self, stats: Any) -> None:
        self._stats = stats

    def bind_wake(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def stalled(self) -> bool:
        """Every clip is being written to MP4 (the encoder wakes the scheduler as each ends)."""
        return all(
            job.encoding is not None and not job.encoding.done() for job in self._jobs.values()
        )

    def close(self) -> None:
        self._encoder.shutdown(wait=False, cancel_futures=True)

    # -- Engine ----------------------------------------------------------------------------

    def admit(self, submit: Submit) -> Delta:
        inputs = submit.inputs
        assert isinstance(inputs, VideoInputs)
        try:
            job = self._job(submit, inputs)
        except RequestError as exc:
            return Delta(
                submit.request_id, finish_reason=FinishReason.ERROR, usage=Usage(0, 0),
                error=exc.info(),
            )  # fmt: skip
        self._jobs[submit.request_id] = job
        return Delta(submit.request_id)

    def step(self) -> list[Delta]:
        """Hands out the clips whose files are written, then runs one unit of the first clip
        still to be made."""
        deltas = []
        for job in list(self._jobs.values()):
            if job.encoding is not None and job.encoding.done():
                deltas.append(self._guarded(job, self._collect))
        making = next((job for job in self._jobs.values() if job.encoding is None), None)
        if making is not None:
            deltas.append(self._guarded(making, self._advance))
        return [delta for delta in deltas if delta is not None]

    def _guarded(self, job: _Job, work: Callable[[_Job], Delta | None]) -> Delta | None:
        """`work(job)`, a failure ending the job with its error."""
        try:
            return work(job)
        except RequestError as exc:
            return self._end(job, FinishReason.ERROR, exc.info())
        except Exception as exc:  # the request was checked up front: the library failed
            log.exception(
                "video request %s failed", job.submit.request_id,
                extra=named(job.submit.request_id),
            )  # fmt: skip
            return self._end(job, FinishReason.ERROR, internal(exc))

    def abort(self, request_ids: Iterable[str]) -> list[Delta]:
        return [
            self._end(self._jobs[rid], FinishReason.ABORT)
            for rid in request_ids
            if rid in self._jobs
        ]

    def active_ids(self) -> list[str]:
        return list(self._jobs)

    def capabilities(self) -> list[Capability]:
        return [Capability.VIDEO_OUT]

    def ready_info(self) -> VideoInfo:
        clips = self.model.clips
        return VideoInfo(
            model_path=self.model.path,
            family=self.model.family,
            default_steps=self.model.default_steps,
            min_steps=clips.min_steps,
            max_steps=MAX_STEPS,
            default_width=clips.default_width,
            default_height=clips.default_height,
            side_multiple=clips.side_multiple,
            max_pixels=clips.max_pixels,
            max_aspect=clips.max_aspect,
            min_seconds=clips.min_seconds,
            max_seconds=clips.max_seconds,
            fps=clips.fps,
            max_prompt_tokens=self.model.max_prompt_tokens,
        )

    # -- requests --------------------------------------------------------------------------

    def _job(self, submit: Submit, inputs: VideoInputs) -> _Job:
        clips = self.model.clips
        if not inputs.prompt.strip():
            raise bad_request("prompt: must not be empty")
        if not 0 <= (inputs.seed if inputs.seed is not None else 0) <= MAX_SEED:
            raise bad_request(f"seed: must be 0 to {MAX_SEED}, got {inputs.seed}")
        steps = inputs.steps if inputs.steps is not None else self.model.default_steps
        if not clips.min_steps <= steps <= MAX_STEPS:
            raise bad_request(f"steps: must be {clips.min_steps} to {MAX_STEPS}, got {steps}")
        if not fits(clips, inputs.width, inputs.height):
            raise bad_request(
                f"size: {inputs.width}x{inputs.height}; this {self.model.family} model makes "
                f"sides in multiples of {clips.side_multiple}, at most {clips.max_pixels} "
                f"pixels, the longer side at most {clips.max_aspect:g} times the shorter"
            )
        finite = math.isfinite(inputs.seconds) and 0 < inputs.seconds <= 3600
        frames = clips.frames(inputs.seconds) if finite else 0
        if not clips.min_seconds <= frames / clips.fps <= clips.max_seconds:
            raise bad_request(
                f"seconds: this {self.model.family} model makes {clips.min_seconds:g} to "
                f"{clips.max_seconds:g} seconds (frames come in blocks: {inputs.seconds:g} s "
                f"would be {frames} frames, {frames / clips.fps:.2f} s)"
            )
        tokens = self.model.prompt_tokens(inputs.prompt)
        if tokens > self.model.max_prompt_tokens:
            raise bad_request(
                f"prompt: {tokens} tokens, over the {self.model.max_prompt_tokens} the "
                f"{self.model.family} text encoder reads"
            )
        seed = inputs.seed if inputs.seed is not None else random.randint(0, MAX_SEED)
        return _Job(submit, inputs, seed, steps, frames, tokens)

    def _advance(self, job: _Job) -> Delta | None:
        if job.run is None:
            job.run = Run(partial(self._generate, job))
        run = job.run
        run.advance()
        for seconds in run.step_seconds:  # the steps that ended (the last: with its decoding)
            if self._stats is not None:
                self._stats.count_video_step(seconds)
        run.step_seconds.clear()
        if run.dead:
            job.run = None
            self._encode(job, run.result)
        progress = job.progress()
        if progress == job.sent:
            return None
        job.sent = progress
        return Delta(job.submit.request_id, progress=progress)

    def _generate(self, job: _Job) -> Any:
        from mlx_vlm.generate.video_generation import VideoGenerationRequest, generate_video

        inputs = job.inputs
        request = VideoGenerationRequest(
            inputs.prompt,
            seed=job.seed,
            steps=job.steps,
            width=inputs.width,
            height=inputs.height,
            num_frames=job.frames,
            progress_callback=job.report,
            # The AdaLN tables are cached per schedule; the weights they come from are kept,
            # so the next request may ask for other steps.
            extra={"drop_adaln_weights": False},
        )
        return generate_video(self.model.generation, request)

    def _encode(self, job: _Job, result: Any) -> None:
        """The decoded clip to numpy here (the MLX thread), then to MP4 on the encoder's."""
        frames = np.array(result.frames)
        audio = None if result.audio is None else np.array(result.audio)
        job.clip = {
            "width": int(result.width),
            "height": int(result.height),
            "frames": int(result.num_frames),
            "fps": float(result.fps),
            "first_frame": np.ascontiguousarray(frames[0]).tobytes(),
        }
        job.encoding = self._encoder.submit(
            _write_mp4, frames, audio, float(result.fps), result.sampling_rate
        )
        job.encoding.add_done_callback(lambda _: self._wake())

    def _collect(self, job: _Job) -> Delta:
        assert job.encoding is not None and job.clip is not None
        clip = VideoOut(mp4=job.encoding.result(), seed=job.seed, **job.clip)
        return self._end(job, FinishReason.STOP, video=clip)

    def _end(
        self,
        job: _Job,
        reason: FinishReason,
        error: ErrorInfo | None = None,
        video: VideoOut | None = None,
    ) -> Delta:
        job.close()
        self._jobs.pop(job.submit.request_id, None)
        return Delta(
            job.submit.request_id,
            finish_reason=reason,
            usage=Usage(prompt_tokens=job.prompt_tokens, completion_tokens=job.denoised),
            error=error,
            video=video,
            progress=1.0 if video is not None else None,
        )


def _nothing() -> None:
    pass


def _write_mp4(frames: np.ndarray, audio: np.ndarray | None, fps: float, rate: int | None) -> bytes:
    """mlx-vlm's MP4 writer, into a folder of its own that is removed afterwards."""
    from mlx_vlm.generate.video_generation import save_video

    with tempfile.TemporaryDirectory(prefix="vomlx-video-") as folder:
        path = save_video(
            frames, Path(folder) / "clip.mp4", fps=fps, audio=audio, sampling_rate=rate
        )
        return path.read_bytes()


def load_video_engine(path: str) -> VideoEngine:
    from worker.videos.model import load_video_model

    return VideoEngine(load_video_model(path))
