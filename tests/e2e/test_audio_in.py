"""Chat with audio (OpenAI `input_audio` parts) through the real server equals direct mlx-vlm.

The server runs the tiny random-weight Qwen3-Omni thinker (text out); the reference is mlx-vlm
used directly: `apply_chat_template(..., num_audios=1)` + `generate(..., audio=[file])` on the
same file written to disk (and `image=[file]` when a picture comes along).
"""

from __future__ import annotations

import base64
import tempfile
from pathlib import Path

import openai
import pytest

from tests.support import direct
from tests.support.omni_audio import mp3_bytes, wav_bytes
from tests.support.server import model_name, openai_client
from tests.support.vision import data_url, png
from worker.tiny_models import ensure_checkpoint

MAX_TOKENS = 16
QUESTION = "What is said in this clip?"


def audio_part(data: bytes, fmt: str) -> dict:
    return {
        "type": "input_audio",
        "input_audio": {"data": base64.b64encode(data).decode(), "format": fmt},
    }


def audio_message(audio: bytes, fmt: str, image: bytes | None = None) -> dict:
    parts = [{"type": "text", "text": QUESTION}, audio_part(audio, fmt)]
    if image is not None:
        parts.append({"type": "image_url", "image_url": {"url": data_url(image)}})
    return {"role": "user", "content": parts}


def greedy_audio_chat(
    path: str, audio: bytes, fmt: str, image: bytes | None = None
) -> direct.DirectResult:
    """What a user of mlx-vlm gets for the same question, audio file (and picture), greedy."""
    from mlx_vlm import generate
    from mlx_vlm.prompt_utils import apply_chat_template

    model, processor = direct.load_vlm(path)
    content = [{"type": "text", "text": QUESTION}] + [{"type": "image"}] * (image is not None)
    prompt = apply_chat_template(
        processor,
        model.config,
        [{"role": "user", "content": content}],
        num_images=int(image is not None),
        num_audios=1,
    )
    with tempfile.TemporaryDirectory() as tmp:
        audio_file = Path(tmp) / f"clip.{fmt}"
        audio_file.write_bytes(audio)
        images = None
        if image is not None:
            (Path(tmp) / "picture.png").write_bytes(image)
            images = [str(Path(tmp) / "picture.png")]
        result = generate(
            model,
            processor,
            prompt,
            image=images,
            audio=[str(audio_file)],
            max_tokens=MAX_TOKENS,
            temperature=0.0,
        )
    return direct.DirectResult(
        result.text, list(result.token_ids), result.prompt_tokens, result.finish_reason
    )


@pytest.fixture(scope="module")
def omni_path() -> str:
    return str(ensure_checkpoint("qwen3_omni_moe"))


@pytest.fixture(scope="module")
def omni_server(start_server, omni_path):
    return start_server(omni_path, name="omni")


def chat(server, path: str, message: dict, **extra):
    return openai_client(server).chat.completions.create(
        model=model_name(path),
        messages=[message],
        max_tokens=MAX_TOKENS,
        temperature=0,
        **extra,
    )


def test_wav_chat_equals_direct_mlx_vlm(omni_server, omni_path):
    audio = wav_bytes(0)
    expected = greedy_audio_chat(omni_path, audio, "wav")

    reply = chat(omni_server, omni_path, audio_message(audio, "wav"))

    direct.assert_chat_equals(reply, expected, MAX_TOKENS)


def test_resampled_stereo_wav_equals_direct_mlx_vlm(omni_server, omni_path):
    audio = wav_bytes(1, seconds=1.5, rate=44100, channels=2)
    expected = greedy_audio_chat(omni_path, audio, "wav")
    reply = chat(omni_server, omni_path, audio_message(audio, "wav"))
    assert reply.choices[0].message.content == expected.text
    assert reply.usage.prompt_tokens == expected.prompt_tokens


def test_mp3_chat_equals_direct_mlx_vlm(omni_server, omni_path):
    audio = mp3_bytes(2)
    expected = greedy_audio_chat(omni_path, audio, "mp3")
    reply = chat(omni_server, omni_path, audio_message(audio, "mp3"))
    assert reply.choices[0].message.content == expected.text
    assert reply.usage.prompt_tokens == expected.prompt_tokens


def test_audio_and_image_together_equal_direct_mlx_vlm(omni_server, omni_path):
    audio, image = wav_bytes(3), png(0)
    expected = greedy_audio_chat(omni_path, audio, "wav", image)
    reply = chat(omni_server, omni_path, audio_message(audio, "wav", image))
    assert reply.choices[0].message.content == expected.text
    assert reply.usage.prompt_tokens == expected.prompt_tokens


def test_streamed_audio_chat_joined_equals_non_streamed(omni_server, omni_path):
    message = audio_message(wav_bytes(4), "wav")
    whole = chat(omni_server, omni_path, message).choices[0].message.content
    chunks = list(chat(omni_server, omni_path, message, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == whole


def test_repeated_audio_request_gives_the_same_answer(omni_server, omni_path):
    # The worker's prefix cache is on by default; a repeat must neither fail nor change.
    message = audio_message(wav_bytes(5), "wav")
    first, second = (chat(omni_server, omni_path, message) for _ in range(2))
    assert first.choices[0].message.content == second.choices[0].message.content


def test_different_audio_gives_different_answers(omni_server, omni_path):
    texts = [
        chat(omni_server, omni_path, audio_message(wav_bytes(seed), "wav"))
        .choices[0]
        .message.content
        for seed in (6, 7)
    ]
    assert texts[0] != texts[1]


def test_undecodable_audio_is_a_400_and_the_server_goes_on(omni_server, omni_path):
    # A WAV header over garbage passes the gateway's format sniffing; the worker's decoder
    # refuses it, failing this request only.
    broken = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00garbage" * 8
    with pytest.raises(openai.BadRequestError) as info:
        chat(omni_server, omni_path, audio_message(broken, "wav"))
    assert "not decodable audio" in info.value.body["message"]
    assert chat(omni_server, omni_path, audio_message(wav_bytes(0), "wav")).choices


def test_model_without_audio_input_answers_400_naming_the_part(default_server, qwen3_path):
    with pytest.raises(openai.BadRequestError) as info:
        chat(default_server, qwen3_path, audio_message(wav_bytes(0), "wav"))
    error = info.value.body
    assert error["param"] == "messages[0].content[1].type"
    assert "does not accept audio input" in error["message"]
    assert "messages[0].content[1].type" in error["message"]
