"""The playground's Videos tab in headless Chromium against a real server serving the tiny
MiniMax-H3 (tests/browser/conftest.py `video_server`): the tab starts a `/v1/videos` job,
follows its progress, and the clip it shows (and offers to download) is, byte for byte, the
MP4 the API gives for that job; Stop deletes a running job; the API's errors show as its
message; a server without a video model has no tab."""

from __future__ import annotations

import base64

import httpx
import pytest

from tests.support.browser import Playground
from tests.support.server import API_KEY
from tests.support.video_direct import needs_ffmpeg

pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[dev]')")
pytestmark = needs_ffmpeg

PROMPT = "a red fox running in the snow"
VISIBLE_TABS = (
    "return [...document.querySelectorAll('#tabs [data-tab]')]"
    ".filter(b => !b.hidden).map(b => b.dataset.tab)"
)
DONE = (
    "const c = document.getElementById('videos-clip');"
    "return !document.getElementById('videos-go').hidden && c.dataset.state !== 'waiting'"
    " && c.dataset.state"
)


@pytest.fixture
def video_page(driver, video_server):
    playground = Playground(driver, video_server.url)
    yield playground
    assert playground.script_errors() == []


def fill(page, **fields) -> None:
    for name, value in fields.items():
        field = page.find(f"#videos-{name}")
        field.clear()
        if value is not None:
            field.send_keys(str(value))


def test_the_videos_tab_shows_the_clip_the_api_makes(video_page, video_server, screenshot):
    page = video_page
    page.open(key=API_KEY)
    assert page.js(VISIBLE_TABS) == ["videos", "status"]
    assert page.js("return document.body.dataset.tab") == "videos"
    fill(page, prompt=PROMPT, size="32x32", seconds=5, steps=3, seed=4)
    page.find("#videos-go").click()
    assert page.wait(DONE, timeout=120) == "final"

    (sent,) = page.requests("/v1/videos", "POST")
    assert sent["json"] == {
        "model": page.js("return document.getElementById('videos-model').value"),
        "prompt": PROMPT, "size": "32x32", "seconds": "5", "num_inference_steps": 3, "seed": 4,
    }  # fmt: skip
    video_id = page.js("return document.getElementById('videos-clip').dataset.videoId")
    polls = page.requests(f"/v1/videos/{video_id}", "GET")
    assert polls and polls[-1]["status"] == 200
    (content,) = page.requests(f"/v1/videos/{video_id}/content", "GET")
    shown = base64.b64decode(content["base64"])  # what the page made the <video>'s blob of
    assert page.find("#videos-clip").get_attribute("src").startswith("blob:")
    answer = httpx.get(
        f"{video_server.url}/v1/videos/{video_id}/content", headers=video_server.headers
    )
    assert answer.status_code == 200 and answer.headers["content-type"] == "video/mp4"
    assert shown == answer.content and shown[4:8] == b"ftyp"
    download = page.find("#videos-download")
    assert download.is_displayed() and download.get_attribute("download") == f"{video_id}.mp4"
    assert page.find("#videos-status").get_attribute("data-kind") == "ok"
    screenshot("videos")


def test_stop_deletes_the_running_job(video_page, video_server):
    page = video_page
    page.open(key=API_KEY)
    fill(page, prompt=PROMPT, size="32x32", seconds=None, steps=100, seed=None)
    page.find("#videos-go").click()
    page.wait("return document.getElementById('videos-progress').value > 0", timeout=60)
    page.find("#videos-stop").click()
    assert page.wait(DONE, timeout=30) == "stopped"
    (deleted,) = page.requests(None, "DELETE")
    assert deleted["status"] == 200
    gone = httpx.get(f"{video_server.url}{deleted['path']}", headers=video_server.headers)
    assert gone.status_code == 404


def test_the_videos_tab_shows_the_error_the_api_answers(video_page, video_server):
    page = video_page
    page.open(key=API_KEY)
    fill(page, prompt=PROMPT, size="48x32", seconds=None, steps=None, seed=None)
    page.find("#videos-go").click()
    assert page.wait(DONE, timeout=30) == "error"
    (sent,) = page.requests("/v1/videos", "POST")
    refusal = httpx.post(
        f"{video_server.url}/v1/videos", json=sent["json"], headers=video_server.headers
    )
    assert refusal.status_code == 400
    assert page.text("#videos-status") == f"400: {refusal.json()['error']['message']}"


def test_a_server_without_a_video_model_has_no_videos_tab(page):
    page.open(key=API_KEY)
    assert "videos" not in page.js(VISIBLE_TABS)
    assert page.js("return document.getElementById('panel-videos').hidden") is True
