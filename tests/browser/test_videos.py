"""The playground's Videos tab in headless Chromium against a real server serving the tiny
MiniMax-H3 (tests/browser/conftest.py `video_server`): the tab starts a `/v1/videos` job,
follows its progress, and the clip it shows (and offers to download) is, byte for byte, the
MP4 the API gives for that job; Stop deletes a running job, also one whose POST had not
answered yet; the seconds field takes the model's longest clip (14.375 s); the API's errors
show as its message; a server without a video model has no tab."""

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
# Holds the answer to the page's POST /v1/videos (the server has made the job) until the test
# calls window.__releasePost(): a POST still on its way, as the page sees it.
HOLD_THE_POST = """
const inner = window.fetch;
window.__postHeld = new Promise((resolve) => { window.__releasePost = resolve; });
window.fetch = async (input, init = {}) => {
  const response = await inner(input, init);
  const url = new URL(typeof input === "string" ? input : input.url, location.href);
  if ((init.method || "GET") === "POST" && url.pathname.endsWith("/v1/videos")) {
    await window.__postHeld;
  }
  return response;
};
"""


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
    # A 32-pixel clip is scaled up with sharp pixels (once its size is known).
    page.wait("return document.getElementById('videos-clip').readyState >= 1")
    assert page.js("return document.getElementById('videos-clip').videoWidth") == 32
    assert page.js("return document.getElementById('videos-clip').className") == "pixelated"
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


def _video_ids(server) -> set[str]:
    answer = httpx.get(f"{server.url}/v1/videos?limit=100", headers=server.headers)
    answer.raise_for_status()
    return {video["id"] for video in answer.json()["data"]}


def test_stop_while_the_post_is_on_its_way_deletes_its_job(video_page, video_server):
    page = video_page
    page.open(key=API_KEY)
    before = _video_ids(video_server)
    page.js(HOLD_THE_POST)
    fill(page, prompt=PROMPT, size="32x32", seconds=None, steps=100, seed=None)
    page.find("#videos-go").click()
    # The server has answered (the job exists) but the page has not had the answer yet.
    page.wait("return window.__requests.some((r) => r.method === 'POST' && r.done)")
    (made,) = _video_ids(video_server) - before
    page.find("#videos-stop").click()
    assert page.wait(DONE) == "stopped"
    assert page.requests(None, "DELETE") == []  # the page does not know the job's id yet
    assert page.text("#videos-status") == "Stopped."
    assert page.find("#videos-go").is_displayed()
    assert not page.find("#videos-stop").is_displayed()

    page.js("window.__releasePost()")
    page.wait("return window.__requests.some((r) => r.method === 'DELETE' && r.done)")
    (deleted,) = page.requests(None, "DELETE")
    assert deleted["path"] == f"/v1/videos/{made}" and deleted["status"] == 200
    assert made not in _video_ids(video_server)  # deleted jobs are forgotten
    gone = httpx.get(f"{video_server.url}/v1/videos/{made}", headers=video_server.headers)
    assert gone.status_code == 404
    assert page.requests(f"/v1/videos/{made}", "GET") == []  # the stopped run never polled
    assert page.text("#videos-status") == "Stopped."
    assert page.js("return document.getElementById('videos-clip').dataset.state") == "stopped"


def test_the_seconds_field_takes_the_longest_clip(video_page, video_server):
    page = video_page
    page.open(key=API_KEY)
    fill(page, prompt=PROMPT, size="32x32", seconds=14.375, steps=2, seed=1)
    assert page.js("return document.getElementById('videos-seconds').validity.valid") is True
    page.find("#videos-go").click()  # an invalid field would keep the form from submitting
    assert page.wait(DONE, timeout=120) == "final"
    (sent,) = page.requests("/v1/videos", "POST")
    assert sent["json"]["seconds"] == "14.375" and sent["status"] == 200
    video_id = page.js("return document.getElementById('videos-clip').dataset.videoId")
    video = httpx.get(f"{video_server.url}/v1/videos/{video_id}", headers=video_server.headers)
    assert video.json()["status"] == "completed" and video.json()["seconds"] == "14.375"


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
