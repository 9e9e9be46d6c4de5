"""Images and audio through the gateway's HTTP routes (fake engine): the Submit carries the
contract's parts and checked bytes; unsafe or broken media is a 400 in each API's shape and
never reaches the engine."""

from __future__ import annotations

import base64
import io
import ipaddress
import struct

import pytest
from PIL import Image

from gateway.media.addresses import address_problem
from gateway.media.resolve import MediaSettings
from protocol.ready import Capability
from tests.support.fake_engine import FakeEngine, make_client, ready
from tests.support.media_http import MediaServer

OMNI = ["chat", "complete", "image_in", "audio_in"]


def png(color: tuple[int, int, int] = (10, 20, 30), size: tuple[int, int] = (4, 3)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, "PNG")
    return buffer.getvalue()


def data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


WAV = b"RIFF" + struct.pack("<I", 36) + b"WAVEfmt " + b"\x00" * 24


def engine_with(capabilities: list[str]) -> FakeEngine:
    engine = FakeEngine()
    engine.ready_info = ready(*(Capability(c) for c in capabilities))
    return engine


def image_part(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def chat_body(*parts: dict, stream: bool = False) -> dict:
    content = [{"type": "text", "text": "what is this?"}, *parts]
    return {"model": "tiny", "messages": [{"role": "user", "content": content}], "stream": stream}


@pytest.fixture
def engine() -> FakeEngine:
    return engine_with(OMNI)


@pytest.fixture
def client(engine):
    with make_client(engine, max_image_pixels=10_000) as client:
        yield client


def test_images_and_audio_reach_the_worker_as_parts_and_bytes_in_order(engine, client):
    red, blue = png((255, 0, 0)), png((0, 0, 255))
    audio = {
        "type": "input_audio",
        "input_audio": {"data": base64.b64encode(WAV).decode(), "format": "wav"},
    }
    body = chat_body(image_part(data_url(red)), audio, image_part(data_url(blue)))
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    inputs = engine.last.inputs
    assert inputs.images == [red, blue]
    assert inputs.audios == [WAV]
    assert inputs.messages[0]["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image"},
        {"type": "audio"},
        {"type": "image"},
    ]


def test_a_streamed_request_gets_its_images_too(engine, client):
    image = png()
    with client.stream(
        "POST", "/v1/chat/completions", json=chat_body(image_part(data_url(image)), stream=True)
    ) as response:
        assert response.status_code == 200
        assert "data: [DONE]" in response.read().decode()
    assert engine.last.inputs.images == [image]


def test_text_requests_carry_no_media_keys(engine, client):
    response = client.post("/v1/chat/completions", json=chat_body())
    assert response.status_code == 200
    assert engine.last.inputs.messages == [{"role": "user", "content": "what is this?"}]
    assert engine.last.inputs.images == engine.last.inputs.audios == []


def test_a_text_model_refuses_images_naming_the_part():
    with make_client(engine_with(["chat", "complete"])) as client:
        response = client.post("/v1/chat/completions", json=chat_body(image_part(data_url(png()))))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "messages[0].content[1].type"
    assert "does not accept image input" in error["message"]


def test_images_while_no_worker_is_ready_are_a_503():
    engine = engine_with(OMNI)
    engine.state, engine.ready_info = "starting", None
    with make_client(engine) as client:
        response = client.post("/v1/chat/completions", json=chat_body(image_part(data_url(png()))))
    assert response.status_code == 503


@pytest.mark.parametrize(
    "url, code, words",
    [
        ("http://127.0.0.1:9/x.png", "media_address_refused", "loopback"),
        ("http://169.254.169.254/latest/meta-data", "media_address_refused", "link-local"),
        ("http://[::ffff:10.0.0.1]/x.png", "media_address_refused", "private"),
        ("file:///etc/passwd", "media_local_path_refused", "--allowed-local-media-path"),
        ("/etc/passwd", "media_local_path_refused", "--allowed-local-media-path"),
        ("gopher://example.com/x", "media_address_refused", "scheme 'gopher'"),
    ],
)
def test_unsafe_urls_are_a_400_and_never_reach_the_engine(engine, client, url, code, words):
    response = client.post("/v1/chat/completions", json=chat_body(image_part(url)))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == code
    assert error["param"] == "messages[0].content[1].image_url.url"
    assert words in error["message"]
    assert engine.requests == []


def test_corrupt_and_oversized_images_are_a_400(engine, client):
    broken = png()[:40]
    response = client.post("/v1/chat/completions", json=chat_body(image_part(data_url(broken))))
    assert (response.status_code, response.json()["error"]["code"]) == (400, "invalid_media")
    huge = png(size=(200, 100))  # 20000 pixels, the cap is 10000
    response = client.post("/v1/chat/completions", json=chat_body(image_part(data_url(huge))))
    assert (response.status_code, response.json()["error"]["code"]) == (400, "media_too_large")
    assert "200x100" in response.json()["error"]["message"]
    assert engine.requests == []


def test_local_files_are_served_from_the_allowed_directory_only(engine, tmp_path):
    image = png()
    (tmp_path / "cat.png").write_bytes(image)
    with make_client(engine, allowed_local_media_path=str(tmp_path)) as client:
        ok = client.post("/v1/chat/completions", json=chat_body(image_part("cat.png")))
        escape = client.post("/v1/chat/completions", json=chat_body(image_part("../x.png")))
    assert ok.status_code == 200, ok.text
    assert engine.last.inputs.images == [image]
    assert escape.status_code == 400
    assert "outside the allowed media directory" in escape.json()["error"]["message"]


def test_remote_images_are_fetched_under_the_address_policy(engine, client):
    # 127.0.0.2 plays a public host; 127.0.0.1 stays loopback.
    def policy(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
        return None if str(ip) == "127.0.0.2" else address_problem(ip)

    image = png((1, 2, 3))
    client.app.state.media_settings = MediaSettings(max_image_pixels=10_000, policy=policy)
    with MediaServer("127.0.0.1", {"/x.png": (200, {}, image)}) as private:
        routes = {"/a.png": (200, {}, image), "/r": (302, {"Location": private.url("/x.png")}, b"")}
        with MediaServer("127.0.0.2", routes) as public:
            ok = client.post(
                "/v1/chat/completions", json=chat_body(image_part(public.url("/a.png")))
            )
            hop = client.post("/v1/chat/completions", json=chat_body(image_part(public.url("/r"))))
    assert ok.status_code == 200, ok.text
    assert engine.last.inputs.images == [image]
    assert hop.status_code == 400
    assert "loopback" in hop.json()["error"]["message"]
    assert private.hits == []
    assert len(engine.requests) == 1


def test_anthropic_image_errors_are_anthropic_shaped(engine, client):
    block = {"type": "image", "source": {"type": "url", "url": "http://169.254.169.254/latest"}}
    body = {"model": "tiny", "max_tokens": 8, "messages": [{"role": "user", "content": [block]}]}
    response = client.post("/v1/messages", json=body)
    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "messages[0].content[0].source.url" in body["error"]["message"]
    assert "link-local" in body["error"]["message"]
    assert engine.requests == []


def test_anthropic_base64_images_reach_the_worker(engine, client):
    image = png()
    source = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(image).decode()}
    content = [{"type": "image", "source": source}, {"type": "text", "text": "describe"}]
    body = {"model": "tiny", "max_tokens": 8, "messages": [{"role": "user", "content": content}]}
    response = client.post("/v1/messages", json=body)
    assert response.status_code == 200, response.text
    assert engine.last.inputs.images == [image]
    assert engine.last.inputs.messages[0]["content"] == [
        {"type": "image"},
        {"type": "text", "text": "describe"},
    ]


def test_models_report_the_capabilities(client):
    card = client.get("/v1/models").json()["data"][0]
    assert card["capabilities"] == OMNI
