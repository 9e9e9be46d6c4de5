"""`/v1/images/generations` and `/v1/images/edits` through the real server (gateway + worker
processes), by the openai SDK, on tiny random-weight checkpoints of two mlx-vlm image families
(Z-Image, MOSS-Image) in their real on-disk layout.

Pixels equal direct mlx-vlm (`generate_image` / `edit_image` on the same checkpoint, same seed,
steps and size), picture i of n with seed + i; a stream's completed picture equals the buffered
one and its previews come first; the formats decode as what they claim; bad requests are 4xx
naming the field and the worker keeps serving; a client leaving stops the denoising between
steps; /metrics counts the steps.
"""

from __future__ import annotations

import base64
import io
import json
import tempfile
import time

import httpx
import numpy as np
import pytest
from PIL import Image

from tests.support.image_direct import direct_picture
from tests.support.server import SAME_BLAS, model_name, openai_client
from worker.tiny_models import ensure_checkpoint

PROMPT = "a red fox in the snow"


@pytest.fixture(scope="module")
def z_image_path() -> str:
    return str(ensure_checkpoint("z_image", "tiny"))


@pytest.fixture(scope="module")
def moss_path() -> str:
    return str(ensure_checkpoint("moss_image", "tiny"))


@pytest.fixture(scope="module")
def z_server(start_server, z_image_path):
    """The tiny Z-Image served alone (an image model as MODEL)."""
    return start_server(z_image_path, *SAME_BLAS, name="z_image")


@pytest.fixture(scope="module")
def chat_and_moss(start_server, qwen3_path, moss_path):
    """A chat model with the tiny MOSS-Image next to it (--image-model)."""
    return start_server(qwen3_path, *SAME_BLAS, "--image-model", moss_path, name="qwen3+moss")


def direct(path: str, seed: int, steps: int, size: int, source: bytes | None = None) -> np.ndarray:
    """What mlx-vlm makes when called directly on the checkpoint (an edit of `source`)."""
    if source is None:
        return direct_picture(path, PROMPT, seed, steps, size)
    with tempfile.NamedTemporaryFile(suffix=".png") as file:
        file.write(source)
        file.flush()
        return direct_picture(path, PROMPT, seed, steps, size, file.name)


def pixels(b64: str) -> np.ndarray:
    return np.array(Image.open(io.BytesIO(base64.b64decode(b64))).convert("RGB"))


def source_png(size: int = 64) -> bytes:
    grid = np.indices((size, size)).sum(0) % 255
    picture = np.stack([grid, 255 - grid, np.full_like(grid, 90)], -1).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(picture).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("family", ["z_image", "moss_image"])
def test_pictures_equal_direct_mlx_vlm_picture_i_with_seed_plus_i(
    family, z_server, chat_and_moss, z_image_path, moss_path
):
    server, path = (z_server, z_image_path) if family == "z_image" else (chat_and_moss, moss_path)
    client = openai_client(server)
    result = client.images.generate(
        model=model_name(path), prompt=PROMPT, n=2, size="64x64",
        extra_body={"seed": 11, "num_inference_steps": 3},
    )  # fmt: skip
    got = [pixels(d.b64_json) for d in result.data]
    assert [g.shape for g in got] == [(64, 64, 3)] * 2
    assert np.array_equal(got[0], direct(path, 11, 3, 64))
    assert np.array_equal(got[1], direct(path, 12, 3, 64))
    assert not np.array_equal(got[0], got[1])
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert result.output_format == "png" and result.background == "opaque"


def test_openai_names_reach_the_image_model_and_no_model_means_it(chat_and_moss, moss_path):
    client = openai_client(chat_and_moss)
    named = client.images.generate(
        model="gpt-image-1",
        prompt=PROMPT,
        size="32x32",
        extra_body={"seed": 3, "num_inference_steps": 2},
    )
    response = httpx.post(
        f"{chat_and_moss.url}/v1/images/generations",
        headers=chat_and_moss.headers,
        json={"prompt": PROMPT, "size": "32x32", "seed": 3, "num_inference_steps": 2},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    assert response.json()["data"][0]["b64_json"] == named.data[0].b64_json
    models = {m.id: m for m in client.models.list().data}
    assert model_name(moss_path) in models
    # the chat model still chats next to it
    chat = client.chat.completions.create(
        model=next(iter(models)), messages=[{"role": "user", "content": "Hi"}], max_tokens=3
    )
    assert chat.choices[0].message.content is not None


def test_a_stream_sends_previews_then_the_picture_equal_to_the_buffered_one(z_server, z_image_path):
    client = openai_client(z_server)
    body = dict(model=model_name(z_image_path), prompt=PROMPT, size="64x64")
    extra = {"seed": 5, "num_inference_steps": 7}
    buffered = client.images.generate(**body, extra_body=extra)
    events = list(client.images.generate(**body, stream=True, partial_images=2, extra_body=extra))
    kinds = [e.type for e in events]
    assert kinds == ["image_generation.partial_image"] * 2 + ["image_generation.completed"]
    assert [e.partial_image_index for e in events[:2]] == [0, 1]
    assert events[-1].b64_json == buffered.data[0].b64_json
    assert events[-1].usage.output_tokens == buffered.usage.output_tokens
    previews = [pixels(e.b64_json) for e in events[:2]]
    assert all(p.shape == (64, 64, 3) for p in previews)
    assert not np.array_equal(previews[0], pixels(events[-1].b64_json))


def test_an_edit_equals_direct_mlx_vlm_and_streams_as_image_edit_events(z_server, z_image_path):
    client = openai_client(z_server)
    source = source_png()
    result = client.images.edit(
        model=model_name(z_image_path), image=("in.png", source, "image/png"), prompt=PROMPT,
        extra_body={"seed": 4, "num_inference_steps": 3},
    )  # fmt: skip
    got = pixels(result.data[0].b64_json)
    assert got.shape == (64, 64, 3)
    assert np.array_equal(got, direct(z_image_path, 4, 3, 64, source))
    events = list(
        client.images.edit(
            model=model_name(z_image_path),
            image=("in.png", source, "image/png"),
            prompt=PROMPT,
            stream=True,
            extra_body={"seed": 4, "num_inference_steps": 3},
        )  # fmt: skip
    )
    assert [e.type for e in events] == ["image_edit.completed"]
    assert events[0].b64_json == result.data[0].b64_json


@pytest.mark.parametrize("fmt", ["jpeg", "webp"])
def test_output_formats_and_data_urls(z_server, z_image_path, fmt):
    client = openai_client(z_server)
    extra = {"seed": 2, "num_inference_steps": 2}
    result = client.images.generate(
        model=model_name(z_image_path), prompt=PROMPT, size="32x32", output_format=fmt,
        output_compression=50, extra_body=extra,
    )  # fmt: skip
    data = base64.b64decode(result.data[0].b64_json)
    assert Image.open(io.BytesIO(data)).format == fmt.upper()
    url = client.images.generate(
        model=model_name(z_image_path), prompt=PROMPT, size="32x32", response_format="url",
        extra_body=extra,
    )  # fmt: skip
    assert url.data[0].url.startswith("data:image/png;base64,")


BAD = [
    ({"size": "65x64"}, "size"),
    ({"size": "4096x4096"}, "size"),
    ({"size": "big"}, "size"),
    ({"n": 11}, "n"),
    ({"num_inference_steps": 1}, "num_inference_steps"),
    ({"num_inference_steps": 1000}, "num_inference_steps"),
    ({"partial_images": 4}, "partial_images"),
    ({"style": "vivid"}, "style"),
    ({"background": "transparent"}, "background"),
    ({"output_format": "gif"}, "output_format"),
    ({"guidance_scale": -1}, "guidance_scale"),
    ({"guidance_scale": 2}, "guidance_scale"),  # Z-Image Turbo: 0 to 1
    ({"seed": -5}, "seed"),
    ({"frobnicate": 1}, "frobnicate"),
    ({"prompt": ""}, "prompt"),
    ({"prompt": "word " * 2000}, "prompt"),
    ({"prompt": "x" * 32001}, "prompt"),
    ({"model": "whisper-1"}, "model"),
]


@pytest.mark.parametrize("change,param", BAD, ids=[p for _, p in BAD])
def test_bad_generations_are_4xx_naming_the_field(z_server, z_image_path, change, param):
    body = {"model": model_name(z_image_path), "prompt": PROMPT, "size": "32x32", **change}
    response = httpx.post(
        f"{z_server.url}/v1/images/generations", headers=z_server.headers, json=body, timeout=120
    )
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["error"]["param"] == param, response.text


def test_bad_edits_are_4xx_naming_the_field_and_the_worker_serves_on(
    z_server, z_image_path, chat_and_moss, moss_path
):
    url = f"{z_server.url}/v1/images/edits"
    form = {"prompt": PROMPT, "model": model_name(z_image_path)}
    cases = [
        ({"image": ("x.png", b"not a picture", "image/png")}, {}, "image"),
        ({}, {}, "image"),
        (
            {
                "image": ("a.png", source_png(), "image/png"),
                "mask": ("m.png", source_png(), "image/png"),
            },
            {},
            "mask",
        ),
        (
            {"image": ("a.png", source_png(), "image/png")},
            {"input_fidelity": "high"},
            "input_fidelity",
        ),
        ({"image": ("a.png", source_png(8), "image/png")}, {}, "image"),  # auto: 8 px a side
        ({"image": ("a.png", source_png()[:-40], "image/png")}, {}, "image"),  # truncated
        (
            {"image": ("a.png", source_png(), "image/png")},
            {"guidance_scale": "2"},
            "guidance_scale",
        ),
    ]
    for files, more, param in cases:
        response = httpx.post(
            url, data={**form, **more}, files=files, headers=z_server.headers, timeout=120
        )
        assert 400 <= response.status_code < 500, (param, response.text)
        assert response.json()["error"]["param"] == param, response.text
    moss = httpx.post(
        f"{chat_and_moss.url}/v1/images/edits",
        headers=chat_and_moss.headers,
        data={"prompt": PROMPT, "model": model_name(moss_path)},
        files={"image": ("a.png", source_png(), "image/png")},
        timeout=120,
    )
    assert moss.status_code == 400 and moss.json()["error"]["param"] == "image", moss.text
    ok = openai_client(z_server).images.generate(
        model=model_name(z_image_path), prompt=PROMPT, size="32x32",
        extra_body={"seed": 1, "num_inference_steps": 2},
    )  # fmt: skip
    assert ok.data[0].b64_json


def test_a_client_leaving_stops_the_denoising_between_steps_and_metrics_count_steps(
    z_server, z_image_path
):
    def steps_done() -> float:
        text = httpx.get(f"{z_server.url}/metrics", headers=z_server.headers, timeout=30).text
        name = "vomlx:image_denoising_steps_total"
        lines = [line for line in text.splitlines() if line.startswith(name)]
        return float(lines[0].rsplit(" ", 1)[1]) if lines else 0.0

    before = steps_done()
    body = {
        "model": model_name(z_image_path), "prompt": PROMPT, "size": "512x512", "n": 10,
        "num_inference_steps": 100, "seed": 9, "stream": True,
    }  # fmt: skip
    with httpx.stream(
        "POST",
        f"{z_server.url}/v1/images/generations",
        json=body,
        headers=z_server.headers,
        timeout=120,
    ) as r:
        assert r.status_code == 200
        time.sleep(2.0)  # some steps run, far from the 990 asked
    time.sleep(1.0)
    stopped = steps_done()
    time.sleep(1.5)
    assert steps_done() == stopped, "denoising went on after the client left"
    assert 0 < stopped - before < 990
    assert (
        httpx.get(f"{z_server.url}/health", headers=z_server.headers, timeout=30).status_code == 200
    )


def test_a_models_file_serves_an_image_model_in_its_own_worker_beside_chat(
    start_server, tmp_path_factory, qwen3_path, z_image_path
):
    text = f"""\
models:
  - id: chat
    path: {qwen3_path}
  - id: painter
    path: {z_image_path}
    kind: image
    aliases: [gpt-image-1]
    options: {{blas: bundled}}
"""
    models_file = tmp_path_factory.mktemp("models") / "pool.yaml"
    models_file.write_text(text)
    server = start_server("--models", str(models_file), name="pool+image")
    client = openai_client(server)
    result = client.images.generate(
        model="gpt-image-1", prompt=PROMPT, size="64x64",
        extra_body={"seed": 11, "num_inference_steps": 3},
    )  # fmt: skip
    assert np.array_equal(pixels(result.data[0].b64_json), direct(z_image_path, 11, 3, 64))
    chat = client.chat.completions.create(
        model="chat", messages=[{"role": "user", "content": "Hi"}], max_tokens=3
    )
    assert chat.choices[0].message.content is not None
    cards = {m.id: m.model_dump() for m in client.models.list().data}
    assert cards["painter"]["task"] == "image" and cards["chat"]["task"] == "chat"
    health = httpx.get(f"{server.url}/health", headers=server.headers, timeout=30).json()
    assert "painter" in json.dumps(health)
