"""Image chat through the real server equals direct mlx-vlm for Qwen2.5-VL, Qwen3-VL and Gemma 3,
one request alone and nine sent at once (images, text and a video mixed, decoded together in
the worker's batch: worker/vision/batched.py); so does video chat: as video for the two whose
processor takes it, as the frames' stills for Gemma 3 (what mlx-vlm sends it).

One server per family (the tiny random-weight checkpoint, prefix cache on as by default),
stopped after its family's tests; the reference is `tests.support.direct.greedy_vlm_chat`
(mlx-vlm's apply_chat_template + generate on the same PNG files, greedy).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support import direct
from tests.support.server import ServerProcess, model_name, openai_client
from tests.support.vision import (
    direct_vlm_video_chat,
    mlx_vlm_message,
    mp4,
    openai_image_message,
    openai_video_message,
    png,
)
from worker.tiny_models import ensure_checkpoint

MAX_TOKENS = 16
QUESTION = "What is in this picture?"


@pytest.fixture(scope="module", params=["qwen2_5_vl", "qwen3_vl", "gemma3"])
def family(request, tmp_path_factory) -> tuple[ServerProcess, str]:
    path = str(ensure_checkpoint(request.param))
    log = tmp_path_factory.mktemp("logs") / f"{request.param}.log"
    server = ServerProcess([path], log, api_key="family-key")
    try:
        server.wait_healthy()
        yield server, path
    finally:
        server.stop()


def test_image_chat_equals_direct_mlx_vlm(family):
    server, path = family
    image = png(0, (96, 72))
    expected = direct.greedy_vlm_chat(
        path,
        [mlx_vlm_message(QUESTION, 1)],
        [image],
        MAX_TOKENS,
    )

    reply = openai_client(server).chat.completions.create(
        model=model_name(path),
        messages=[openai_image_message(QUESTION, image)],
        max_tokens=MAX_TOKENS,
        temperature=0,
    )

    direct.assert_chat_equals(reply, expected, MAX_TOKENS)


def test_streamed_two_image_chat_equals_direct_mlx_vlm(family):
    server, path = family
    images = [png(1, (224, 112)), png(2, (64, 96))]
    expected = direct.greedy_vlm_chat(
        path,
        [mlx_vlm_message("Compare these.", 2)],
        images,
        MAX_TOKENS,
    )

    chunks = openai_client(server).chat.completions.create(
        model=model_name(path),
        messages=[openai_image_message("Compare these.", *images)],
        max_tokens=MAX_TOKENS,
        temperature=0,
        stream=True,
    )

    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == expected.text


def test_concurrent_image_text_and_video_chats_each_equal_direct_mlx_vlm(family):
    """Eight image and text chats and a video one, sent at once: they decode together (the
    video's and the images' own mRoPE offsets per row), each equal to mlx-vlm alone."""
    server, path = family
    asks = [
        ([png(10 + i, (96, 72))] if i % 3 else [], QUESTION + " Say more." * i, 6 + i)
        for i in range(8)
    ]
    expected = [
        direct.greedy_vlm_chat(path, [mlx_vlm_message(text, len(images))], images, n)
        for images, text, n in asks
    ]
    clip = mp4(5, frames=10)
    video_first = "gemma3" not in path  # where mlx-vlm's own prompt puts the clip
    video_message = openai_video_message(
        "What happens here?", clip, video_first, fps=3.0, max_frames=6
    )
    expected_video = direct_vlm_video_chat(
        path, clip, "What happens here?", MAX_TOKENS, fps=3.0, max_frames=6
    )
    client = openai_client(server)

    def ask(ask: tuple[list[bytes], str, int]):
        images, text, n = ask
        message = (
            openai_image_message(text, *images)
            if images
            else {"role": "user", "content": [{"type": "text", "text": text}]}
        )
        return client.chat.completions.create(
            model=model_name(path), messages=[message], max_tokens=n, temperature=0
        )

    def ask_video():
        return client.chat.completions.create(
            model=model_name(path), messages=[video_message], max_tokens=MAX_TOKENS,
            temperature=0,
        )  # fmt: skip

    with ThreadPoolExecutor(9) as pool:
        video = pool.submit(ask_video)
        replies = list(pool.map(ask, asks))
        video_reply = video.result()

    for reply, want, (_, _, n) in zip(replies, expected, asks, strict=True):
        direct.assert_chat_equals(reply, want, n)
    assert video_reply.choices[0].message.content == expected_video["text"]


def test_image_chats_beside_a_streamed_chat_each_equal_direct_mlx_vlm(family):
    """While a streamed chat decodes, image chats' prefills are paced to its decode step (a
    decoder layer at a time; each Qwen-VL tower block in two passes of row slices, few at
    these sizes: worker/vision/slicing.py, whose finer cuts tests/unit/test_vision_slicing.py
    checks): every answer still equals mlx-vlm's alone, and the stream what the same chat
    gives alone."""
    server, path = family
    client = openai_client(server)
    pictures = [png(30 + i, (224, 224)) for i in range(2)]
    expected = [
        direct.greedy_vlm_chat(path, [mlx_vlm_message(QUESTION, 1)], [picture], MAX_TOKENS)
        for picture in pictures
    ]
    story = [{"role": "user", "content": [{"type": "text", "text": "Tell me a long story."}]}]
    ask = {"model": model_name(path), "temperature": 0}
    alone = client.chat.completions.create(messages=story, max_tokens=300, **ask)
    pieces: list[str] = []
    stream = iter(
        client.chat.completions.create(messages=story, max_tokens=300, stream=True, **ask)
    )
    while not pieces:  # the stream decodes before the pictures arrive
        chunk = next(stream)
        pieces += [choice.delta.content for choice in chunk.choices if choice.delta.content]

    def ask_image(picture: bytes):
        message = openai_image_message(QUESTION, picture)
        return client.chat.completions.create(messages=[message], max_tokens=MAX_TOKENS, **ask)

    with ThreadPoolExecutor(2) as pool:
        replies = pool.map(ask_image, pictures)
        for chunk in stream:
            pieces += [choice.delta.content for choice in chunk.choices if choice.delta.content]
        for reply, want in zip(replies, expected, strict=True):
            direct.assert_chat_equals(reply, want, MAX_TOKENS)
    assert "".join(pieces) == alone.choices[0].message.content


@pytest.mark.parametrize("seed", [6, 8])  # the second clip must not get the first one's state
def test_video_chat_equals_direct_mlx_vlm(family, seed):
    server, path = family
    clip = mp4(seed, frames=10)
    # Where mlx-vlm's own prompt puts them: a video before the text, stills after it.
    first = "gemma3" not in path
    message = openai_video_message("What happens here?", clip, first, fps=3.0, max_frames=6)
    request = dict(model=model_name(path), messages=[message], max_tokens=MAX_TOKENS, temperature=0)
    expected = direct_vlm_video_chat(
        path, clip, "What happens here?", MAX_TOKENS, fps=3.0, max_frames=6
    )

    reply = openai_client(server).chat.completions.create(**request)

    assert reply.choices[0].message.content == expected["text"]
    assert reply.usage.prompt_tokens == expected["prompt_tokens"]
    assert reply.usage.completion_tokens == MAX_TOKENS
