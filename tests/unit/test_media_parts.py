"""OpenAI image / audio parts and Anthropic image blocks -> the worker contract's parts, in
order, checked against what the model accepts; text-only requests are unchanged."""

from __future__ import annotations

import pytest

from gateway.api.anthropic_messages.requests import parse_count, parse_create
from gateway.generation.chat_body import parse_chat
from gateway.http.errors import APIError
from gateway.media.parts import MediaCollector, MediaItem

VISION = ["chat", "complete", "image_in"]
OMNI = [*VISION, "audio_in"]
IMG_A = {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}}
IMG_B = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
AUDIO = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}


def chat(messages, capabilities=OMNI):
    media = MediaCollector(capabilities, "tiny-vl")
    return parse_chat({"model": "tiny-vl", "messages": messages}, 16, media)


def test_openai_media_parts_become_contract_parts_in_order():
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "compare"}, IMG_A, IMG_B]},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [AUDIO, {"type": "text", "text": "and this?"}, IMG_B]},
    ]
    req = chat(messages)
    assert req.inputs.messages == [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "compare"}, {"type": "image"}, {"type": "image"}],
        },
        {"role": "assistant", "content": "ok"},
        {
            "role": "user",
            "content": [
                {"type": "audio"},
                {"type": "text", "text": "and this?"},
                {"type": "image"},
            ],
        },
    ]
    assert req.media == (
        MediaItem("image", "messages[1].content[1].image_url.url", url=IMG_A["image_url"]["url"]),
        MediaItem("image", "messages[1].content[2].image_url.url", url=IMG_B["image_url"]["url"]),
        MediaItem(
            "audio", "messages[3].content[0].input_audio.data", data="UklGRg==", format="wav"
        ),
        MediaItem("image", "messages[3].content[2].image_url.url", url=IMG_B["image_url"]["url"]),
    )
    assert req.inputs.images == []  # bytes arrive when the request is about to run


def test_an_image_url_given_as_a_plain_string_is_accepted():
    req = chat([{"role": "user", "content": [{"type": "image_url", "image_url": "https://x/y"}]}])
    assert req.media[0].url == "https://x/y"


def test_text_only_requests_are_unchanged_by_a_vision_model():
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]
    for capabilities in ((), OMNI):
        req = chat(messages, capabilities)
        assert req.inputs.messages == [{"role": "user", "content": "a\nb"}]
        assert req.media == ()


VIDEO = {"type": "video_url", "video_url": {"url": "https://example.com/v.mp4"}}


def test_video_parts_carry_their_frame_sampling_in_place():
    sampled = {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAAA",
                                                  "fps": 1, "max_frames": 8}}  # fmt: skip
    content = [VIDEO, {"type": "text", "text": "what happens?"}, IMG_A, sampled]
    req = chat([{"role": "user", "content": content}], [*VISION, "video_in"])
    assert req.inputs.messages[0]["content"] == [
        {"type": "video", "max_frames": 32},
        {"type": "text", "text": "what happens?"},
        {"type": "image"},
        {"type": "video", "fps": 1.0, "max_frames": 8},
    ]
    assert [(m.kind, m.path) for m in req.media] == [
        ("video", "messages[0].content[0].video_url.url"),
        ("image", "messages[0].content[2].image_url.url"),
        ("video", "messages[0].content[3].video_url.url"),
    ]


def test_a_request_holds_at_most_four_video_parts():
    with pytest.raises(APIError) as info:
        chat([{"role": "user", "content": [VIDEO] * 5}], [*VISION, "video_in"])
    assert info.value.param == "messages[0].content[4]"
    assert "at most 4 video parts" in info.value.message


@pytest.mark.parametrize(
    "capabilities, part, kind",
    [(["chat"], IMG_A, "image"), (VISION, AUDIO, "audio"), (OMNI, VIDEO, "video")],
)
def test_media_the_model_does_not_take_is_a_400_naming_the_part(capabilities, part, kind):
    with pytest.raises(APIError) as info:
        chat([{"role": "user", "content": [part]}], capabilities)
    assert info.value.status == 400
    assert info.value.param == "messages[0].content[0].type"
    assert f"model `tiny-vl` does not accept {kind} input" in info.value.message


def test_media_outside_user_messages_is_refused():
    with pytest.raises(APIError) as info:
        chat([{"role": "system", "content": [IMG_A]}, {"role": "user", "content": "hi"}])
    assert info.value.param == "messages[0].content[0].type"


@pytest.mark.parametrize(
    "part, param",
    [
        ({"type": "image_url"}, "messages[0].content[0].image_url"),
        ({"type": "image_url", "image_url": {"url": ""}}, "messages[0].content[0].image_url.url"),
        (
            {"type": "image_url", "image_url": {"url": "u", "detail": "max"}},
            "messages[0].content[0].image_url.detail",
        ),
        (
            {"type": "image_url", "image_url": {"url": "u", "size": 3}},
            "messages[0].content[0].image_url.size",
        ),
        (
            {"type": "input_audio", "input_audio": {"data": "AA==", "format": "flac"}},
            "messages[0].content[0].input_audio.format",
        ),
        (
            {"type": "input_audio", "input_audio": {"format": "wav"}},
            "messages[0].content[0].input_audio.data",
        ),
    ],
)
def test_malformed_media_parts_are_a_400_naming_the_field(part, param):
    with pytest.raises(APIError) as info:
        chat([{"role": "user", "content": [part]}])
    assert info.value.param == param


# -- Anthropic -------------------------------------------------------------------------------

B64 = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
URL = {"type": "image", "source": {"type": "url", "url": "https://example.com/c.jpg"}}


def create(content, capabilities=VISION):
    body = {"model": "tiny-vl", "max_tokens": 8, "messages": [{"role": "user", "content": content}]}
    return parse_create(body, MediaCollector(capabilities, "tiny-vl")).generation


def test_anthropic_image_blocks_become_contract_parts_in_order():
    req = create([B64, {"type": "text", "text": "and"}, {**URL, "cache_control": {"type": "x"}}])
    assert req.inputs.messages == [
        {
            "role": "user",
            "content": [{"type": "image"}, {"type": "text", "text": "and"}, {"type": "image"}],
        }
    ]
    assert req.media == (
        MediaItem("image", "messages[0].content[0].source.data", data="AAAA"),
        MediaItem("image", "messages[0].content[2].source.url", url="https://example.com/c.jpg"),
    )


def test_anthropic_text_blocks_stay_one_string():
    req = create([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    assert req.inputs.messages == [{"role": "user", "content": "a\nb"}]
    assert req.media == ()


def test_anthropic_images_on_a_text_model_are_a_400_naming_the_block():
    with pytest.raises(APIError) as info:
        create([B64], ["chat"])
    assert info.value.param == "messages[0].content[0].type"
    assert "does not accept image input" in info.value.message


@pytest.mark.parametrize(
    "block, param",
    [
        ({"type": "image", "source": {}}, "messages[0].content[0].source.type"),
        (
            {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "A"}},
            "messages[0].content[0].source.media_type",
        ),
        (
            {"type": "image", "source": {"type": "file", "file_id": "f"}},
            "messages[0].content[0].source.type",
        ),
        ({"type": "image", "source": {"type": "url"}}, "messages[0].content[0].source.url"),
    ],
)
def test_malformed_anthropic_image_blocks_are_a_400_naming_the_field(block, param):
    with pytest.raises(APIError) as info:
        create([block])
    assert info.value.param == param


def test_count_tokens_refuses_images():
    body = {"model": "tiny-vl", "messages": [{"role": "user", "content": [B64]}]}
    with pytest.raises(APIError) as info:
        parse_count(body)
    assert info.value.param == "messages[0].content[0].type"
    assert "count_tokens" in info.value.message
