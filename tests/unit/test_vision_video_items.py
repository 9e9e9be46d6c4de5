"""Video items go back where the client's video parts were, between mlx-vlm's rendered text and
image items (worker/vision/video.py)."""

from __future__ import annotations

from worker.vision.video import with_video_items

TEXT = {"type": "text", "text": "what happens?", "content": "what happens?"}
IMAGE = {"type": "image"}


def test_videos_go_back_in_place_and_other_messages_are_untouched():
    parts = [
        {"type": "text", "text": "first"},
        {"type": "video"},
        {"type": "text", "text": ""},  # mlx-vlm renders no item for an empty text
        {"type": "image"},
        {"type": "video"},
        {"type": "text", "text": "what happens?"},
    ]
    first = {"type": "text", "text": "first", "content": "first"}
    system = {"role": "system", "content": "be brief"}
    rendered = [system, {"role": "user", "content": [first, IMAGE, TEXT]}]
    out = with_video_items(rendered, {1: parts})
    assert out[0] is system
    assert out[1]["content"] == [first, {"type": "video"}, IMAGE, {"type": "video"}, TEXT]


def test_a_message_without_videos_is_kept_as_rendered():
    rendered = [{"role": "user", "content": [IMAGE, TEXT]}]
    parts = {0: [{"type": "image"}, {"type": "text", "text": "what happens?"}]}
    assert with_video_items(rendered, parts) == rendered
