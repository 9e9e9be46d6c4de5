"""The browser tier: the web playground (gateway/playground/) in headless Chromium, driven by
Selenium, against one real server per session.

The server serves `qwen3_scripted` (it thinks `THINKING`, answers `ANSWER`, and calls a tool
when a request forces one: worker/tiny_models/scripted.py) with a tiny Qwen3-TTS and a tiny
Whisper next to it, behind an API key, so one page shows chat, speech and transcription; a
second server, started only for the images tab's tests, serves a tiny Z-Image alone.
Every test here is marked `browser` (and `e2e`); they skip, saying why, only when Chromium
cannot be installed (tests/support/browser.py). With `VOMLX_PLAYGROUND_SCREENSHOTS=DIR` the
tests save screenshots there (scripts/playground_screenshots.py: docs/playground/).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.browser import NotInstalled, Playground, ensure_chromium, start_chromium
from tests.support.server import API_KEY, ServerProcess
from tests.support.stt_audio import SENTENCES, speech_wav
from worker.tiny_models import ensure_checkpoint


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.e2e)
        item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium():
    pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[dev]')")
    try:
        return ensure_chromium()
    except NotInstalled as exc:
        pytest.skip(f"no headless Chromium: {exc}")


@pytest.fixture(scope="session")
def playground_server(tmp_path_factory) -> ServerProcess:
    paths = [ensure_checkpoint(name) for name in ("qwen3_scripted", "qwen3_tts", "whisper")]
    log = tmp_path_factory.mktemp("logs") / "playground-server.log"
    args = [str(paths[0]), "--speech-model", str(paths[1]), "--transcription-model", str(paths[2])]
    server = ServerProcess(args, log, api_key=API_KEY)
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()


def _served_alone(tmp_path_factory, arch: str) -> Iterator[ServerProcess]:
    """The tiny random-weight `arch` served alone (as MODEL), behind the key."""
    path = ensure_checkpoint(arch, "tiny")
    log = tmp_path_factory.mktemp("logs") / f"{arch}-server.log"
    server = ServerProcess([str(path)], log, api_key=API_KEY)
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def image_server(tmp_path_factory) -> Iterator[ServerProcess]:
    """A Z-Image: an image model."""
    yield from _served_alone(tmp_path_factory, "z_image")


@pytest.fixture(scope="session")
def video_server(tmp_path_factory) -> Iterator[ServerProcess]:
    """A MiniMax-H3: a video model."""
    yield from _served_alone(tmp_path_factory, "minimax_h3")


@pytest.fixture(scope="session")
def models(playground_server) -> dict[str, str]:
    """Capability -> the id of the model that has it."""
    r = httpx.get(f"{playground_server.url}/v1/models", headers=playground_server.headers)
    r.raise_for_status()
    return {cap: m["id"] for m in r.json()["data"] for cap in m["capabilities"]}


@pytest.fixture(scope="session")
def speech_file(tmp_path_factory) -> Path:
    """A recording to upload and to play as the fake microphone: espeak-ng's voice (or a
    synthetic one without it)."""
    return speech_wav(tmp_path_factory.mktemp("audio") / "hello.wav", SENTENCES[0])


@pytest.fixture(scope="session")
def driver(chromium, speech_file):
    browser = start_chromium(chromium, fake_microphone=speech_file)
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture
def screenshot(driver, request):
    """`screenshot(name)` saves the page as DIR/name.png when VOMLX_PLAYGROUND_SCREENSHOTS
    names a directory, and does nothing otherwise."""
    folder = os.environ.get("VOMLX_PLAYGROUND_SCREENSHOTS")

    def take(name: str) -> None:
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(Path(folder) / f"{name}.png"))

    return take


@pytest.fixture
def page(driver, playground_server):
    """The playground, not yet opened; afterwards, its scripts must not have logged errors."""
    playground = Playground(driver, playground_server.url)
    yield playground
    assert playground.script_errors() == []
