"""Video items go back where the client's video parts were, between mlx-vlm's rendered text and
image items, and a model without a video processor gets the stills mlx-vlm would send it
(worker/vision/video.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from tests.support.vision import mp4
from worker.runtime.errors import RequestError
from worker.vision.video import PixelBudget, decode_stills, with_video_items

IMAGE = {"type": "image"}


def text(t: str) -> dict:
    return {"type": "text", "text": t, "content": t}  # mlx-vlm's text item


def test_videos_go_back_in_place_and_other_messages_are_untouched():
    parts = [
        {"type": "text", "text": "first"},
        {"type": "video"},
        {"type": "text", "text": ""},  # mlx-vlm renders no item for an empty text
        {"type": "image"},
        {"type": "video"},
        {"type": "text", "text": "what happens?"},
    ]
    system = {"role": "system", "content": "be brief"}
    rendered = [system, {"role": "user", "content": [text("first"), IMAGE, text("what happens?")]}]
    out = with_video_items(rendered, {1: parts})
    assert out[0] is system
    assert out[1]["content"] == [
        text("first"),
        {"type": "video"},
        IMAGE,
        {"type": "video"},
        text("what happens?"),
    ]


def test_texts_mlx_vlm_merged_around_a_video_stay_apart():
    # Without an image in the message mlx-vlm renders its texts as one item.
    parts = [{"type": "text", "text": "A"}, {"type": "video"}, {"type": "text", "text": "B"}]
    rendered = [{"role": "user", "content": [text("A B")]}]
    assert with_video_items(rendered, {0: parts})[0]["content"] == [
        text("A"),
        {"type": "video"},
        text("B"),
    ]


@pytest.mark.parametrize(
    ("content", "needle"),
    [("flat text", "cannot place video parts"),
     ([{"type": "audio"}, text("hi")], "together with audio parts")],
)  # fmt: skip
def test_a_rendering_that_cannot_hold_the_video_is_a_bad_request(content, needle):
    parts = [{"type": "video"}, {"type": "text", "text": "hi"}]
    with pytest.raises(RequestError, match=needle):
        with_video_items([{"role": "user", "content": content}], {0: parts})


def test_a_message_without_videos_is_kept_as_rendered():
    rendered = [{"role": "user", "content": [IMAGE, text("what happens?")]}]
    parts = {0: [{"type": "image"}, {"type": "text", "text": "what happens?"}]}
    assert with_video_items(rendered, parts) == rendered


@pytest.mark.parametrize(("fps", "max_frames"), [(2.0, 16), (4.0, 5), (None, 3)])
def test_stills_are_the_frames_mlx_vlm_sends_a_model_without_a_video_processor(fps, max_frames):
    from mlx_vlm.generate.video import sample_video_frames, subsample_evenly

    clip = mp4(7, frames=24, fps=6.0)
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "clip.mp4"
        file.write_bytes(clip)
        frames, _ = sample_video_frames([str(file)], fps or 2.0)
    expected = subsample_evenly(frames, max_frames)

    stills = decode_stills(0, clip, fps, max_frames, PixelBudget())

    assert len(stills) == len(expected)
    for got, want in zip(stills, expected, strict=True):
        assert np.array_equal(np.asarray(got), np.asarray(want))
