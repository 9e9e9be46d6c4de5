"""Chat with images through the real server on mlx-vlm equals direct mlx-vlm (greedy).

The server runs the tiny random-weight Qwen2-VL checkpoint; the reference is
`tests.support.direct.greedy_vlm_chat` (apply_chat_template + generate on the same PNG files).
"""

from __future__ import annotations

import base64

import anthropic
import pytest

from tests.support import direct
from tests.support.server import model_name, openai_client
from tests.support.vision import mlx_vlm_message, openai_image_message, png
from worker.tiny_models import ensure_checkpoint

MAX_TOKENS = 24
QUESTION = "What is in this picture?"


@pytest.fixture(scope="module")
def vision_path() -> str:
    return str(ensure_checkpoint("qwen2_vl"))


@pytest.fixture(scope="module")
def vision_server(start_server, vision_path):
    return start_server(vision_path, name="vision")


def test_image_chat_equals_direct_mlx_vlm(vision_server, vision_path):
    image = png(0)
    expected = direct.greedy_vlm_chat(
        vision_path, [mlx_vlm_message(QUESTION, 1)], [image], MAX_TOKENS
    )

    reply = openai_client(vision_server).chat.completions.create(
        model=model_name(vision_path),
        messages=[openai_image_message(QUESTION, image)],
        max_tokens=MAX_TOKENS,
        temperature=0,
    )

    direct.assert_chat_equals(reply, expected, MAX_TOKENS)


def test_different_images_give_different_answers(vision_server, vision_path):
    client = openai_client(vision_server)
    texts = [
        client.chat.completions.create(
            model=model_name(vision_path),
            messages=[openai_image_message(QUESTION, png(seed))],
            max_tokens=MAX_TOKENS,
            temperature=0,
        )
        .choices[0]
        .message.content
        for seed in (0, 1)
    ]
    assert texts[0] != texts[1]


def test_streamed_image_chat_joined_equals_non_streamed(vision_server, vision_path):
    client = openai_client(vision_server)
    request = dict(
        model=model_name(vision_path),
        messages=[openai_image_message(QUESTION, png(2))],
        max_tokens=MAX_TOKENS,
        temperature=0,
    )
    whole = client.chat.completions.create(**request).choices[0].message.content
    chunks = list(client.chat.completions.create(stream=True, **request))
    joined = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert joined == whole


def test_two_images_in_one_message_equal_direct_mlx_vlm(vision_server, vision_path):
    images = [png(3), png(4, size=(56, 112))]
    expected = direct.greedy_vlm_chat(
        vision_path, [mlx_vlm_message("Compare these.", 2)], images, MAX_TOKENS
    )

    reply = openai_client(vision_server).chat.completions.create(
        model=model_name(vision_path),
        messages=[openai_image_message("Compare these.", *images)],
        max_tokens=MAX_TOKENS,
        temperature=0,
    )

    assert reply.choices[0].message.content == expected.text
    assert reply.usage.prompt_tokens == expected.prompt_tokens


def test_anthropic_image_block_equals_openai_image_part(vision_server, vision_path):
    image = png(5)
    openai_text = (
        openai_client(vision_server)
        .chat.completions.create(
            model=model_name(vision_path),
            messages=[openai_image_message(QUESTION, image)],
            max_tokens=MAX_TOKENS,
            temperature=0,
        )
        .choices[0]
        .message.content
    )
    client = anthropic.Anthropic(
        base_url=vision_server.url, api_key=vision_server.api_key, max_retries=0, timeout=120
    )
    block = {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(image).decode(),
        },
    }
    message = client.messages.create(
        model=model_name(vision_path),
        max_tokens=MAX_TOKENS,
        messages=[{"role": "user", "content": [{"type": "text", "text": QUESTION}, block]}],
        extra_body={"temperature": 0.0},  # anthropic 2.x takes sampling fields in the body
    )
    assert "".join(b.text for b in message.content if b.type == "text") == openai_text


def test_a_follow_up_turn_about_the_image_reuses_its_kv_and_equals_direct(
    vision_server, vision_path
):
    client = openai_client(vision_server)
    image = png(6)
    first = client.chat.completions.create(
        model=model_name(vision_path),
        messages=[openai_image_message(QUESTION, image)],
        max_tokens=MAX_TOKENS,
        temperature=0,
    )
    answer = first.choices[0].message.content
    follow_up = [
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "And what else?"},
    ]
    expected = direct.greedy_vlm_chat(
        vision_path, [mlx_vlm_message(QUESTION, 1), *follow_up], [image], MAX_TOKENS
    )

    second = client.chat.completions.create(
        model=model_name(vision_path),
        messages=[openai_image_message(QUESTION, image), *follow_up],
        max_tokens=MAX_TOKENS,
        temperature=0,
    )

    assert second.choices[0].message.content == expected.text
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert first.usage.prompt_tokens <= cached < second.usage.prompt_tokens


def test_a_padded_vocabularys_rows_without_text_answer_200_streamed_and_not(start_server):
    """The `padded` checkpoint's random weights pick rows past its tokenizer's entries (as
    Qwen's 151,936 rows over 151,665 entries allow): they add no text; the answer is a 200,
    streamed the same (mlx-vlm's detokenizer raised an IndexError on them: a 500)."""
    path = str(ensure_checkpoint("qwen2_vl", "padded"))
    server = start_server(path, name="vision-padded")
    client = openai_client(server)
    request = dict(
        model=model_name(path),
        messages=[openai_image_message(QUESTION, png(3))],
        max_tokens=MAX_TOKENS,
        temperature=0,
    )
    whole = client.chat.completions.create(logprobs=True, **request)
    assert whole.usage.completion_tokens == MAX_TOKENS
    # The case happened: a token without text (every entry of this BPE has some).
    assert any(t.token == "" for t in whole.choices[0].logprobs.content)
    chunks = list(client.chat.completions.create(stream=True, **request))
    joined = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert joined == whole.choices[0].message.content
