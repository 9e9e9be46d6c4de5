"""Chat with video through the real server on mlx-vlm equals direct mlx-vlm (greedy).

The server runs the tiny random-weight Qwen2-VL checkpoint (whose processor takes videos
itself); the reference is mlx-vlm's own way with a video file: `apply_chat_template(...,
video=[file])` and `stream_generate(..., video=[file], fps=..., max_frames=...)`
(tests.support.vision.direct_vlm_video_chat). Bad videos are 400s naming the part, and the
worker keeps serving.
"""

from __future__ import annotations

import base64

import httpx
import pytest

from tests.support.server import model_name, openai_client
from tests.support.vision import direct_vlm_video_chat, mp4, openai_video_message
from worker.tiny_models import ensure_checkpoint

MAX_TOKENS = 16
QUESTION = "What happens in this video?"
PART = "messages[0].content[0].video_url"


@pytest.fixture(scope="module")
def vision_path() -> str:
    return str(ensure_checkpoint("qwen2_vl"))


@pytest.fixture(scope="module")
def vision_server(start_server, vision_path):
    return start_server(vision_path, name="video")


def chat(server, vision_path, message, **extra):
    return openai_client(server).chat.completions.create(
        model=model_name(vision_path), messages=[message], max_tokens=MAX_TOKENS, temperature=0,
        **extra,
    )  # fmt: skip


@pytest.mark.parametrize(
    "sampling",
    [{"fps": 4.0, "max_frames": 8}, {"max_frames": 4}, {}],
    ids=["fps-and-frames", "fewer-frames", "defaults"],
)
def test_video_chat_equals_direct_mlx_vlm(vision_server, vision_path, sampling):
    clip = mp4(0, frames=12)
    reference = {"max_frames": 32, **sampling}  # the server's default max_frames is 32
    expected = direct_vlm_video_chat(vision_path, clip, QUESTION, MAX_TOKENS, **reference)

    reply = chat(vision_server, vision_path, openai_video_message(QUESTION, clip, **sampling))

    assert reply.choices[0].message.content == expected["text"]
    assert reply.usage.completion_tokens == len(expected["tokens"]) == MAX_TOKENS
    assert reply.usage.prompt_tokens == expected["prompt_tokens"]


def test_more_frames_make_a_longer_prompt_and_other_clips_other_answers(vision_server, vision_path):
    clip = mp4(1, frames=16)
    few = chat(vision_server, vision_path, openai_video_message(QUESTION, clip, max_frames=4))
    many = chat(vision_server, vision_path, openai_video_message(QUESTION, clip, max_frames=16))
    other = chat(
        vision_server, vision_path, openai_video_message(QUESTION, mp4(2, frames=16), max_frames=16)
    )
    assert many.usage.prompt_tokens > few.usage.prompt_tokens
    assert other.choices[0].message.content != many.choices[0].message.content


def test_streamed_video_chat_joined_equals_non_streamed(vision_server, vision_path):
    message = openai_video_message(QUESTION, mp4(3), max_frames=8)
    whole = chat(vision_server, vision_path, message).choices[0].message.content
    chunks = list(chat(vision_server, vision_path, message, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == whole


def _bad(server, vision_path, part: dict) -> httpx.Response:
    body = {"model": model_name(vision_path), "max_tokens": 4,
            "messages": [{"role": "user", "content": [part, {"type": "text", "text": "hi"}]}]}  # fmt: skip
    return httpx.post(
        f"{server.url}/v1/chat/completions", json=body, headers=server.headers, timeout=60
    )


def _url(data: bytes) -> str:
    return "data:video/mp4;base64," + base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("video_url", "param", "says"),
    [
        ({"url": _url(b"\x89PNG\r\n\x1a\n" + bytes(64))}, f"{PART}.url", "not a video"),
        ({"url": _url(bytes(4) + b"ftypisom" + bytes(200))}, None, "videos[0]"),
        ({"url": _url(b""), "max_frames": 8}, f"{PART}.url", ""),
        ({"url": "data:video/mp4;base64,AAAA", "max_frames": 65}, f"{PART}.max_frames", "2 to 64"),
        ({"url": "data:video/mp4;base64,AAAA", "max_frames": 1}, f"{PART}.max_frames", "2 to 64"),
        ({"url": "data:video/mp4;base64,AAAA", "fps": 0}, f"{PART}.fps", "above 0"),
        ({"url": "data:video/mp4;base64,AAAA", "fps": "2"}, f"{PART}.fps", "a number"),
        ({"url": "data:video/mp4;base64,AAAA", "frames": 4}, f"{PART}.frames", ""),
        ({"url": "ftp://example.com/a.mp4"}, f"{PART}.url", "scheme"),
    ],
    ids=[
        "png",
        "undecodable",
        "empty",
        "too-many-frames",
        "one-frame",
        "zero-fps",
        "string-fps",
        "unknown-key",
        "ftp",
    ],  # fmt: skip
)
def test_a_bad_video_is_a_400_naming_it_and_the_worker_serves_on(
    vision_server, vision_path, video_url, param, says
):
    pid = vision_server.worker_pid()
    response = _bad(vision_server, vision_path, {"type": "video_url", "video_url": video_url})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    if param is not None:
        assert error["param"] == param
    assert says in error["message"]
    assert vision_server.worker_pid() == pid
    reply = chat(vision_server, vision_path, openai_video_message(QUESTION, mp4(4), max_frames=4))
    assert reply.usage.completion_tokens == MAX_TOKENS


def test_a_video_longer_than_the_cap_is_a_400(vision_server, vision_path):
    clip = mp4(5, frames=4, fps=0.005)  # 4 frames over 800 s
    response = _bad(vision_server, vision_path,
                    {"type": "video_url", "video_url": {"url": _url(clip)}})  # fmt: skip
    assert response.status_code == 400, response.text
    assert "at most 600 s" in response.json()["error"]["message"]


def test_a_request_whose_videos_hold_too_many_pixels_is_a_400(vision_server, vision_path):
    clip = mp4(0, frames=64, size=(1280, 720), noise=False)  # 64 x 921,600 pixels each
    parts = [{"type": "video_url", "video_url": {"url": _url(clip), "max_frames": 64}}] * 3
    body = {"model": model_name(vision_path), "max_tokens": 4,
            "messages": [{"role": "user", "content": [*parts, {"type": "text", "text": "hi"}]}]}  # fmt: skip
    response = httpx.post(
        f"{vision_server.url}/v1/chat/completions", json=body, headers=vision_server.headers,
        timeout=60,
    )  # fmt: skip
    assert response.status_code == 400, response.text
    assert "videos[2]" in response.json()["error"]["message"]
    assert "sampled pixels a request" in response.json()["error"]["message"]
