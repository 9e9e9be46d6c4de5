"""The playground's Images tab in headless Chromium against a real server serving a tiny
Z-Image (tests/browser/conftest.py `image_server`): the tab streams `/v1/images/generations`
with previews, and the picture it shows is, byte for byte, the one the API answers to the same
request; the API's errors show as its message; a server without an image model has no tab."""

from __future__ import annotations

import base64
import io
import json

import httpx
import numpy as np
import pytest
from PIL import Image

from tests.support.browser import Playground
from tests.support.server import API_KEY

pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[dev]')")

PROMPT = "a red fox in the snow"
VISIBLE_TABS = (
    "return [...document.querySelectorAll('#tabs [data-tab]')]"
    ".filter(b => !b.hidden).map(b => b.dataset.tab)"
)
DONE = (
    "const p = document.getElementById('images-picture');"
    "return !document.getElementById('images-go').hidden && p.dataset.state !== 'waiting'"
    " && p.dataset.state"
)


@pytest.fixture
def image_page(driver, image_server):
    """The playground of the image server, not yet opened; afterwards, its scripts must not
    have logged errors."""
    playground = Playground(driver, image_server.url)
    yield playground
    assert playground.script_errors() == []


@pytest.fixture(scope="module")
def image_model(image_server) -> str:
    r = httpx.get(f"{image_server.url}/v1/models", headers=image_server.headers, timeout=10)
    r.raise_for_status()
    (model,) = [m["id"] for m in r.json()["data"] if "image_out" in m["capabilities"]]
    return model


def generate(page, prompt: str, size: str, steps: int | None = None, seed: int | None = None):
    for element_id, value in [
        ("images-prompt", prompt),
        ("images-size", size),
        ("images-steps", steps),
        ("images-seed", seed),
    ]:
        field = page.find(f"#{element_id}")
        field.clear()
        if value is not None:
            field.send_keys(str(value))
    page.find("#images-go").click()
    return page.wait(DONE, timeout=120)


def generations(server, body: dict) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/images/generations", json=body, headers=server.headers, timeout=120
    )


def stream_events(server, body: dict) -> list[dict]:
    """The data of each server-sent event the API streams for `body`."""
    events = []
    with httpx.stream(
        "POST",
        f"{server.url}/v1/images/generations",
        json=body,
        headers=server.headers,
        timeout=120,
    ) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data:") and line[5:].strip() != "[DONE]":
                events.append(json.loads(line[5:]))
    return events


def data_url_png(url: str) -> tuple[str, np.ndarray]:
    """The base64 of a `data:image/png;base64,...` URL and its pixels."""
    head, _, b64 = url.partition(",")
    assert head == "data:image/png;base64"
    return b64, np.array(Image.open(io.BytesIO(base64.b64decode(b64))).convert("RGB"))


def test_the_images_tab_streams_previews_then_shows_the_picture_the_api_makes(
    image_page, image_server, image_model, screenshot
):
    page = image_page
    page.open(key=API_KEY)
    # the only served model makes images: its tab is there, and shown first
    assert page.js(VISIBLE_TABS) == ["images", "status"]
    assert page.js("return document.body.dataset.tab") == "images"
    options = "return [...document.getElementById('images-model').options].map(o => o.value)"
    assert page.js(options) == [image_model]

    assert generate(page, PROMPT, "64x64", steps=4, seed=3) == "final"

    (sent,) = page.requests("/v1/images/generations")
    assert sent["json"] == {
        "model": image_model,
        "prompt": PROMPT,
        "output_format": "png",
        "stream": True,
        "partial_images": 2,
        "size": "64x64",
        "num_inference_steps": 4,
        "seed": 3,
    }
    assert sent["status"] == 200 and sent["contentType"].startswith("text/event-stream")

    shown_b64, shown = data_url_png(page.find("#images-picture").get_attribute("src"))
    whole = {k: v for k, v in sent["json"].items() if k not in ("stream", "partial_images")}
    answer = generations(image_server, whole)
    assert answer.status_code == 200, answer.text
    expected_b64 = answer.json()["data"][0]["b64_json"]
    assert shown_b64 == expected_b64
    _, expected = data_url_png(f"data:image/png;base64,{expected_b64}")
    assert shown.shape == (64, 64, 3)
    assert np.array_equal(shown, expected)

    # the previews, in the order they came, are those the API streams for the same body
    # (partial_images is "up to": a Z-Image run of 4 steps has 3 denoiser calls and sends 1)
    previews = page.js(
        "return [...document.querySelectorAll('#images-previews img')]"
        ".map(i => [Number(i.dataset.index), i.src])"
    )
    streamed = stream_events(image_server, sent["json"])
    partials = [e for e in streamed if e["type"] == "image_generation.partial_image"]
    assert partials and [i for i, _ in previews] == [e["partial_image_index"] for e in partials]
    assert [data_url_png(src)[0] for _, src in previews] == [e["b64_json"] for e in partials]
    assert streamed[-1]["type"] == "image_generation.completed"
    assert streamed[-1]["b64_json"] == shown_b64

    download = page.find("#images-download")
    assert download.is_displayed()
    assert download.get_attribute("href").startswith("blob:")
    assert download.get_attribute("download") == "image.png"
    assert page.find("#images-status").get_attribute("data-kind") == "ok"
    assert page.js("return document.getElementById('images-picture').naturalWidth") == 64
    screenshot("images")


def test_the_images_tab_shows_the_error_the_api_answers(image_page, image_server, image_model):
    page = image_page
    page.open(key=API_KEY)
    assert generate(page, PROMPT, "63x64", steps=4) == "error"

    (sent,) = page.requests("/v1/images/generations")
    refusal = generations(image_server, sent["json"])
    assert refusal.status_code == 400
    message = refusal.json()["error"]["message"]
    assert "size" in message
    assert page.text("#images-status") == f"400: {message}"
    assert page.js("return document.getElementById('images-result').hidden") is True


def test_a_server_without_an_image_model_has_no_images_tab(page):
    page.open(key=API_KEY)
    assert "images" not in page.js(VISIBLE_TABS)
    assert page.js("return document.getElementById('panel-images').hidden") is True
    assert page.js("return document.getElementById('images-model').options.length") == 0
