"""The video engine (worker/videos/) in-process on the tiny MiniMax-H3 checkpoint: the clip
(first frame, MP4 bytes) equals direct `generate_video`; progress rises step by step; a second
request waits for the first to be denoised, not written; the worker's stats count the
denoising steps; an abort stops a run between steps; bad input is a bad_request naming the
field before any work."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from protocol.inputs import MAX_SEED, VideoInputs
from protocol.messages import Delta, ErrorCode, FinishReason, Submit
from tests.support.video_direct import direct_clip, needs_ffmpeg
from worker.runtime.stats import WorkerStats
from worker.tiny_models import ensure_checkpoint
from worker.videos import engine as engine_module
from worker.videos.engine import VideoEngine, load_video_engine

PROMPT = "a red fox running in the snow"
pytestmark = needs_ffmpeg


@pytest.fixture(scope="module")
def h3() -> str:
    return str(ensure_checkpoint("minimax_h3", "tiny"))


@pytest.fixture(scope="module")
def engine(h3) -> VideoEngine:
    return load_video_engine(h3)


def run(engine: VideoEngine, *submits: Submit) -> dict[str, list[Delta]]:
    out: dict[str, list[Delta]] = {}
    for submit in submits:
        out[submit.request_id] = [engine.admit(submit)]
    while engine.active_ids():
        for delta in engine.step():
            out[delta.request_id].append(delta)
    return out


def test_the_clip_equals_direct_mlx_vlm_and_progress_rises(engine, h3):
    inputs = VideoInputs(PROMPT, 64, 32, seconds=5, steps=4, seed=7)
    stats = WorkerStats("h3")
    engine.bind_stats(stats)
    deltas = run(engine, Submit("a", inputs, False))["a"]
    end = deltas[-1]
    assert end.finish_reason == FinishReason.STOP and end.video is not None
    clip = end.video
    direct = direct_clip(h3, PROMPT, 7, 4, 64, 32, 5)
    assert (clip.width, clip.height, clip.frames, clip.fps, clip.seed) == (64, 32, 124, 24.0, 7)
    assert direct.frames.shape == (124, 32, 64, 3)
    first = np.frombuffer(clip.first_frame, np.uint8).reshape(32, 64, 3)
    assert np.array_equal(first, direct.frames[0])
    assert clip.mp4 == direct.mp4
    progress = [d.progress for d in deltas if d.progress is not None]
    assert progress == sorted(progress) and progress[-1] == 1.0 and len(progress) >= 3
    assert end.usage.completion_tokens == 3  # 4 steps: 3 denoising steps (mlx-vlm's schedule)
    assert end.usage.prompt_tokens == engine.model.prompt_tokens(PROMPT) > 0
    counted = stats.snapshot()
    assert counted.video_steps == 3 and counted.video_step_seconds > 0


def test_a_second_request_waits_and_an_abort_stops_a_run_between_steps(engine):
    engine.admit(Submit("x", VideoInputs(PROMPT, 32, 32, seconds=5, steps=6, seed=1), False))
    engine.admit(Submit("y", VideoInputs(PROMPT, 32, 32, seconds=5, steps=3, seed=2), False))
    seen = [d for _ in range(3) for d in engine.step()]
    assert {d.request_id for d in seen} == {"x"}  # one clip denoised at a time
    ended = engine.abort(["x"])
    assert ended[0].finish_reason == FinishReason.ABORT and ended[0].video is None
    out = {"y": []}
    while engine.active_ids():
        for delta in engine.step():
            out[delta.request_id].append(delta)
    assert out["y"][-1].finish_reason == FinishReason.STOP and out["y"][-1].video is not None


def test_the_next_clip_denoises_while_one_is_written_and_the_encoder_wakes_the_scheduler(
    engine, monkeypatch
):
    written = threading.Event()
    write = engine_module._write_mp4

    def held(*args):
        written.wait(30)
        return write(*args)

    monkeypatch.setattr(engine_module, "_write_mp4", held)
    wakes = threading.Semaphore(0)
    engine.bind_wake(wakes.release)
    try:
        engine.admit(Submit("a", VideoInputs(PROMPT, 32, 32, seconds=5, steps=2, seed=1), False))
        engine.admit(Submit("b", VideoInputs(PROMPT, 32, 32, seconds=5, steps=3, seed=2), False))
        out: dict[str, list[Delta]] = {"a": [], "b": []}
        while engine._jobs["a"].encoding is None:
            for delta in engine.step():
                out[delta.request_id].append(delta)
        assert not engine.stalled()  # b is still to be denoised
        while engine._jobs["b"].encoding is None:
            for delta in engine.step():
                out[delta.request_id].append(delta)
        # b was denoised to its end while a's file was held back.
        assert [d.progress for d in out["b"]][-1] == pytest.approx(engine_module.DENOISING_SHARE)
        assert engine.stalled() and engine.step() == []
        assert not wakes.acquire(timeout=0.05)
        written.set()
        assert wakes.acquire(timeout=30) and wakes.acquire(timeout=30)  # a's file, then b's
        assert not engine.stalled()
        for delta in engine.step():
            out[delta.request_id].append(delta)
        assert engine.active_ids() == []
        assert [out[r][-1].finish_reason for r in "ab"] == [FinishReason.STOP] * 2
        assert all(out[r][-1].video.mp4 for r in "ab")
    finally:
        engine.bind_wake(engine_module._nothing)
        written.set()


@pytest.mark.parametrize(
    "inputs, field",
    [
        (VideoInputs(" ", 32, 32, 5), "prompt"),
        (VideoInputs(PROMPT, 32, 32, 5, steps=1), "steps"),
        (VideoInputs(PROMPT, 32, 32, 5, steps=101), "steps"),
        (VideoInputs(PROMPT, 48, 32, 5), "size"),
        (VideoInputs(PROMPT, 160, 32, 5), "size"),  # 5:1
        (VideoInputs(PROMPT, 2048, 2048, 5), "size"),
        (VideoInputs(PROMPT, 32, 32, 4), "seconds"),
        (VideoInputs(PROMPT, 32, 32, 15), "seconds"),  # 362 frames: 15.08 s
        (VideoInputs(PROMPT, 32, 32, 0), "seconds"),
        (VideoInputs(PROMPT, 32, 32, float("inf")), "seconds"),
        (VideoInputs(PROMPT, 32, 32, 5, seed=-1), "seed"),
        (VideoInputs(PROMPT, 32, 32, 5, seed=MAX_SEED + 1), "seed"),
        (VideoInputs("fox " * 5000, 32, 32, 5), "prompt"),
    ],
)
def test_bad_input_is_refused_naming_the_field(engine, inputs, field):
    delta = engine.admit(Submit("bad", inputs, False))
    assert delta.finish_reason == FinishReason.ERROR
    assert delta.error.code == ErrorCode.BAD_REQUEST
    assert delta.error.message.startswith(f"{field}:"), delta.error.message
    assert engine.active_ids() == []
