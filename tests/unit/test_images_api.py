"""The Images API's gateway side (gateway/api/images/) on a scripted engine: what reaches the
worker, the bodies and stream events (validated against the official OpenAI document), and
the 400s that name their field before anything reaches a worker."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
from PIL import Image

from protocol.inputs import ImageInputs
from protocol.messages import Delta, ErrorCode, ErrorInfo, ImageOut, Usage
from protocol.ready import Capability, ImageInfo
from tests.support.fake_engine import FakeEngine, accepted, make_client, ready
from tests.support.openai_spec import validate
from tests.support.vision import png_header_only

INFO = ImageInfo("/models/tiny", "z_image", 9, 0.0, 2, 100, 16, 2048, 16, True, True, 1.0, 6)
MOSS = ImageInfo("/models/tiny", "moss_image", 50, 3.0, 1, 100, 16, 2048, 16, False, True)


def picture(index: int = 0, partial: int | None = None, size: int = 32) -> ImageOut:
    pixels = np.full((size, size, 3), 40 * (index + 1) + (partial or 0), np.uint8)
    return ImageOut(index, size, size, pixels.tobytes(), 7 + index, partial)


def engine(*batches: list[Delta], info: ImageInfo = INFO) -> FakeEngine:
    fake = FakeEngine([accepted(), *batches])
    caps = [Capability.IMAGE_OUT] + ([Capability.IMAGE_EDIT] if info.edit else [])
    fake.ready_info = ready(*caps, text=None, image=info)
    return fake


def done(*pictures: ImageOut) -> list[Delta]:
    return [Delta("r", finish_reason="stop", usage=Usage(12, 6), images=list(pictures))]


def decoded(b64: str) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(b64)))


def test_a_generation_reaches_the_worker_as_image_inputs_and_answers_openais_body():
    fake = engine([Delta("r", images=[picture(0)], usage=Usage(12, 3))], done(picture(1)))
    body = {"prompt": "a fox", "n": 2, "size": "32x32", "seed": 7, "quality": "low"}
    with make_client(fake) as client:
        response = client.post("/v1/images/generations", json=body)
    assert response.status_code == 200, response.text
    validate("ImagesResponse", response.json())
    inputs = fake.requests[0].inputs
    assert isinstance(inputs, ImageInputs)
    assert (inputs.prompt, inputs.n, inputs.width, inputs.height, inputs.seed) == (
        "a fox", 2, 32, 32, 7,
    )  # fmt: skip
    assert inputs.steps == 4  # low: half the model's 9, rounded
    data = response.json()["data"]
    assert [np.array(decoded(d["b64_json"]))[0, 0, 0] for d in data] == [40, 80]
    assert response.json()["usage"]["output_tokens"] == 6
    assert "size" not in response.json()  # 32x32 is none of OpenAI's sizes


def test_auto_size_is_1024_and_quality_high_doubles_the_steps():
    fake = engine(done(picture(0)))
    with make_client(fake) as client:
        client.post("/v1/images/generations", json={"prompt": "a fox", "quality": "high"})
    inputs = fake.requests[0].inputs
    assert (inputs.width, inputs.height, inputs.steps) == (1024, 1024, 18)


def test_a_stream_sends_partial_images_then_completed_events_valid_under_openais_schemas():
    fake = engine(
        [Delta("r", images=[picture(0, partial=0)])],
        [Delta("r", images=[picture(0, partial=1)])],
        done(picture(0)),
    )
    body = {"prompt": "a fox", "size": "1024x1024", "stream": True, "partial_images": 2}
    with make_client(fake) as client:
        response = client.post("/v1/images/generations", json=body)
    assert response.status_code == 200
    events = [
        json.loads(line[len("data: "):])
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]  # fmt: skip
    assert [e["type"] for e in events] == [
        "image_generation.partial_image", "image_generation.partial_image",
        "image_generation.completed",
    ]  # fmt: skip
    for event in events:
        validate("ImageGenStreamEvent", event)
    assert events[-1]["usage"]["total_tokens"] == 18
    assert fake.requests[0].inputs.partial_images == 2


def test_an_edit_form_carries_the_picture_and_formats_decode_as_they_claim():
    fake = engine(done(picture(0)))
    png = io.BytesIO()
    Image.new("RGB", (40, 40), "red").save(png, format="PNG")
    form = {"prompt": "make it blue", "output_format": "webp", "output_compression": "80"}
    with make_client(fake) as client:
        response = client.post(
            "/v1/images/edits", data=form, files={"image": ("a.png", png.getvalue(), "image/png")}
        )
    assert response.status_code == 200, response.text
    validate("ImagesResponse", response.json())
    inputs = fake.requests[0].inputs
    assert inputs.image == png.getvalue() and (inputs.width, inputs.height) == (0, 0)
    assert decoded(response.json()["data"][0]["b64_json"]).format == "WEBP"


def test_response_format_url_is_a_data_url():
    fake = engine(done(picture(0)))
    with make_client(fake) as client:
        body = {"prompt": "a fox", "size": "32x32", "response_format": "url"}
        response = client.post("/v1/images/generations", json=body)
    url = response.json()["data"][0]["url"]
    assert url.startswith("data:image/png;base64,")
    assert decoded(url.split(",", 1)[1]).size == (32, 32)


@pytest.mark.parametrize(
    "change,param",
    [
        ({"size": "40x40"}, "size"),
        ({"size": "8x8"}, "size"),
        ({"size": "x"}, "size"),
        ({"num_inference_steps": 1}, "num_inference_steps"),
        ({"n": 0}, "n"),
        ({"style": "natural"}, "style"),
        ({"background": "transparent"}, "background"),
        ({"response_format": "file"}, "response_format"),
        ({"seed": 2**40}, "seed"),
        ({"guidance_scale": "high"}, "guidance_scale"),
        ({"guidance_scale": 1.5}, "guidance_scale"),  # this model takes 0 to 1
        ({"prompt": "x" * 32001}, "prompt"),
        ({"whatever": 1}, "whatever"),
    ],
)
def test_bad_generations_are_400s_naming_the_field_and_reach_no_worker(change, param):
    fake = engine(done(picture(0)))
    with make_client(fake) as client:
        response = client.post("/v1/images/generations", json={"prompt": "a fox", **change})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param
    assert fake.requests == []


def png_bytes(side: int = 40) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (side, side), "red").save(buffer, format="PNG")
    return buffer.getvalue()


def test_an_edit_to_a_model_that_only_generates_names_image():
    fake = engine(done(picture(0)), info=MOSS)
    with make_client(fake) as client:
        response = client.post(
            "/v1/images/edits",
            data={"prompt": "x"},
            files={"image": ("a.png", png_bytes(), "image/png")},
        )
        as_json = client.post(
            "/v1/images/edits",
            json={
                "prompt": "x",
                "images": [
                    {"image_url": "data:image/png;base64," + base64.b64encode(png_bytes()).decode()}
                ],
            },
        )
    assert response.status_code == 400 and response.json()["error"]["param"] == "image"
    assert "does not edit" in response.json()["error"]["message"]
    assert as_json.status_code == 400
    assert as_json.json()["error"]["param"] == "images[0].image_url"


def test_an_edit_form_picture_is_checked_like_one_by_url_before_any_worker():
    fake = engine(done(picture(0)))
    truncated = png_bytes()[:-30]
    with make_client(fake) as client:
        answers = [
            client.post(
                "/v1/images/edits",
                data={"prompt": "x"},
                files={"image": ("a.png", data, "image/png")},
            )
            for data in (png_header_only(9000, 9000), truncated, b"GIF89a not really")
        ]
    for response in answers:
        assert response.status_code == 400, response.text
        assert response.json()["error"]["param"] == "image"
    assert "pixels" in answers[0].json()["error"]["message"]
    assert fake.requests == []


def test_previews_only_with_a_stream_and_quality_scales_an_edits_own_default():
    fake = engine(done(picture(0)), done(picture(0)))
    with make_client(fake) as client:
        client.post(
            "/v1/images/generations", json={"prompt": "a fox", "size": "32x32", "partial_images": 2}
        )
        client.post(
            "/v1/images/edits",
            data={"prompt": "x", "quality": "high"},
            files={"image": ("a.png", png_bytes(), "image/png")},
        )
    assert fake.requests[0].inputs.partial_images == 0  # nothing would carry them
    assert fake.requests[1].inputs.steps == 12  # high: double the edit default of 6, not 9


def test_a_worker_refusal_of_a_json_edits_picture_names_its_url():
    refusal = [
        Delta(
            "r", finish_reason="error", usage=Usage(0, 0),
            error=ErrorInfo(ErrorCode.BAD_REQUEST, "image: a 4000x40 picture; pass a size"),
        )
    ]  # fmt: skip
    fake = engine(refusal)
    url = "data:image/png;base64," + base64.b64encode(png_bytes()).decode()
    with make_client(fake) as client:
        response = client.post(
            "/v1/images/edits", json={"prompt": "x", "images": [{"image_url": url}]}
        )
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "images[0].image_url"


def test_a_server_without_an_image_model_says_how_to_add_one():
    with make_client(FakeEngine()) as client:
        response = client.post("/v1/images/generations", json={"prompt": "a fox"})
    assert response.status_code == 400
    assert "--image-model" in response.json()["error"]["message"]


def test_a_json_edit_takes_its_picture_by_data_url_and_refuses_file_ids_by_name():
    fake = engine(done(picture(0)))
    png = io.BytesIO()
    Image.new("RGB", (40, 40), "red").save(png, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(png.getvalue()).decode()
    with make_client(fake) as client:
        ok = client.post("/v1/images/edits", json={"prompt": "x", "images": [{"image_url": url}]})
        file_id = client.post(
            "/v1/images/edits", json={"prompt": "x", "images": [{"file_id": "file-1"}]}
        )
        junk = client.post(
            "/v1/images/edits",
            json={"prompt": "x", "images": [{"image_url": "data:image/png;base64,AAAA"}]},
        )
        two = client.post(
            "/v1/images/edits",
            json={"prompt": "x", "images": [{"image_url": url}, {"image_url": url}]},
        )
    assert ok.status_code == 200, ok.text
    assert fake.requests[0].inputs.image == png.getvalue()
    assert file_id.status_code == 400 and file_id.json()["error"]["param"] == "images[0].file_id"
    assert junk.status_code == 400 and junk.json()["error"]["param"] == "images[0].image_url"
    assert two.status_code == 400 and two.json()["error"]["param"] == "images"
