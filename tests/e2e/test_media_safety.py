"""Images in requests against the real server: a text model refuses them cleanly; a vision
server refuses unsafe URLs (SSRF), local paths, oversized and corrupt images with a 400 naming
the reason, and keeps serving. Through the official openai and anthropic SDKs."""

from __future__ import annotations

import base64
import io

import anthropic
import openai
import pytest
from PIL import Image

from tests.support.media_http import MediaServer
from tests.support.server import model_name, openai_client

MAX_PIXELS = 20_000  # the vision server's --max-image-pixels


def png(size: tuple[int, int] = (56, 56), color: tuple[int, int, int] = (200, 40, 90)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, "PNG")
    return buffer.getvalue()


def data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def ask(client: openai.OpenAI, model: str, url: str | None, max_tokens: int = 4):
    content: list[dict] = [{"type": "text", "text": "What is in the picture?"}]
    if url is not None:
        content.append({"type": "image_url", "image_url": {"url": url}})
    return client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": content}],
        max_tokens=max_tokens,
        temperature=0,
    )


def anthropic_client(server) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=server.url, api_key=server.api_key, max_retries=0, timeout=120
    )


@pytest.fixture(scope="module")
def private_server():
    """Something listening on loopback, as an internal service would: it must never be hit."""
    with MediaServer("127.0.0.1", {"/x.png": (200, {}, png()), "/": (200, {}, b"secret")}) as s:
        yield s


def ssrf_urls(private: MediaServer) -> list[tuple[str, str]]:
    """(url, a word the refusal must contain)."""
    return [
        (private.url("/x.png"), "loopback"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        (f"http://localhost:{private.port}/", "non-public address"),
        ("http://metadata.google.internal/computeMetadata/v1/", "metadata"),
        ("file:///etc/passwd", "--allowed-local-media-path"),
        ("/etc/passwd", "--allowed-local-media-path"),
    ]


# -- the default (text) server ---------------------------------------------------------------


def test_a_text_model_refuses_images_and_keeps_serving(default_server, qwen3_path, private_server):
    client = openai_client(default_server)
    model = model_name(qwen3_path)
    for url, _ in [(data_url(png()), ""), *ssrf_urls(private_server)]:
        with pytest.raises(openai.BadRequestError) as info:
            ask(client, model, url)
        assert "does not accept image input" in info.value.body["message"]
        assert info.value.body["param"] == "messages[0].content[1].type"
    assert private_server.hits == []
    assert ask(client, model, None).choices[0].message.content is not None


def test_a_text_model_refuses_anthropic_images(default_server, qwen3_path):
    client = anthropic_client(default_server)
    source = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png()).decode()}
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(
            model=model_name(qwen3_path),
            max_tokens=4,
            messages=[{"role": "user", "content": [{"type": "image", "source": source}]}],
        )
    assert info.value.body["error"]["type"] == "invalid_request_error"
    assert "does not accept image input" in info.value.body["error"]["message"]


# -- a vision server ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vision(start_server):
    from worker.tiny_models import ensure_checkpoint

    try:
        path = str(ensure_checkpoint("qwen2_vl"))
    except Exception as exc:  # the builder may not know this architecture yet
        pytest.skip(f"no qwen2_vl tiny checkpoint: {exc}")
    server = start_server(path, "--max-image-pixels", str(MAX_PIXELS), name="vision")
    return server, model_name(path)


def test_ssrf_attempts_are_refused_naming_the_reason_and_the_server_keeps_serving(
    vision, private_server
):
    server, model = vision
    client = openai_client(server)
    for url, reason in ssrf_urls(private_server):
        with pytest.raises(openai.BadRequestError) as info:
            ask(client, model, url)
        assert reason in info.value.body["message"], url
        assert info.value.body["param"] == "messages[0].content[1].image_url.url"
    assert private_server.hits == []
    answer = ask(client, model, data_url(png()))
    assert answer.choices[0].finish_reason in ("stop", "length")
    assert answer.usage.completion_tokens > 0


def test_oversized_and_corrupt_images_are_refused(vision):
    server, model = vision
    client = openai_client(server)
    with pytest.raises(openai.BadRequestError) as info:
        ask(client, model, data_url(png((200, 200))))  # 40000 pixels > 20000
    assert info.value.body["code"] == "media_too_large"
    assert "200x200" in info.value.body["message"]
    with pytest.raises(openai.BadRequestError) as info:
        ask(client, model, data_url(png()[:60]))
    assert info.value.body["code"] == "invalid_media"
    with pytest.raises(openai.BadRequestError) as info:
        ask(client, model, "data:image/png;base64,@@not-base64@@")
    assert info.value.body["code"] == "invalid_media"
    assert ask(client, model, data_url(png())).usage.completion_tokens > 0


def test_anthropic_image_urls_are_checked_the_same_way(vision):
    server, model = vision
    client = anthropic_client(server)
    source = {"type": "url", "url": "http://169.254.169.254/latest/meta-data"}
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(
            model=model,
            max_tokens=4,
            messages=[{"role": "user", "content": [{"type": "image", "source": source}]}],
        )
    assert info.value.body["type"] == "error"
    assert "link-local" in info.value.body["error"]["message"]
    image = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png()).decode()}
    message = client.messages.create(
        model=model,
        max_tokens=4,
        messages=[
            {
                "role": "user",
                "content": [{"type": "image", "source": image}, {"type": "text", "text": "Hi"}],
            }
        ],
    )
    assert message.usage.output_tokens > 0
