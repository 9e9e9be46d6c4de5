"""`input_audio` parts for a text-only chat model served with a speech recognizer: each part
becomes its transcript (gateway/generation/audio_parts.py). Through the real processes (the
tiny qwen3 with the tiny Whisper beside it): the answer and the prompt equal those of the same
chat with the transcript that /v1/audio/transcriptions gives written in the part's place,
streamed and not, and the usage says a part was heard that way. Without a recognizer an audio
part is still a 400 naming it."""

from __future__ import annotations

import base64

import httpx
import pytest

from tests.support.server import model_name, openai_client
from tests.support.stt_audio import SENTENCES, speech_wav


@pytest.fixture(scope="module")
def wav(tmp_path_factory) -> bytes:
    return speech_wav(tmp_path_factory.mktemp("parts") / "q.wav", SENTENCES[0]).read_bytes()


def _messages(audio_or_text: bytes | str) -> list[dict]:
    if isinstance(audio_or_text, bytes):
        data = base64.b64encode(audio_or_text).decode()
        part = {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}
    else:
        part = {"type": "text", "text": audio_or_text}
    return [{"role": "user", "content": [{"type": "text", "text": "Answer this:"}, part]}]


def _chat(server, path, messages, **kw):
    return openai_client(server).chat.completions.create(
        model=model_name(path), messages=messages, max_tokens=12, temperature=0, **kw
    )


def test_an_audio_part_is_answered_as_its_transcript(full_server, qwen3_path, wav):
    transcript = (
        openai_client(full_server)
        .audio.transcriptions.create(model="whisper-1", file=("q.wav", wav, "audio/wav"))
        .text.strip()
    )
    heard = _chat(full_server, qwen3_path, _messages(wav))
    written = _chat(full_server, qwen3_path, _messages(transcript))
    assert heard.choices[0].message.content == written.choices[0].message.content
    assert heard.usage.prompt_tokens == written.usage.prompt_tokens
    assert heard.usage.prompt_tokens_details.model_extra["transcribed_audio_parts"] == 1
    assert "transcribed_audio_parts" not in (written.usage.prompt_tokens_details.model_extra or {})

    chunks = list(
        _chat(full_server, qwen3_path, _messages(wav), stream=True,
              stream_options={"include_usage": True})
    )  # fmt: skip
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == heard.choices[0].message.content
    assert chunks[-1].usage.prompt_tokens_details.model_extra["transcribed_audio_parts"] == 1


def test_an_undecodable_audio_part_is_a_400_naming_it(full_server, qwen3_path):
    body = {"model": model_name(qwen3_path), "messages": _messages(b"not audio at all"),
            "max_tokens": 4}  # fmt: skip
    reply = httpx.post(f"{full_server.url}/v1/chat/completions", json=body,
                       headers=full_server.headers, timeout=120)  # fmt: skip
    assert reply.status_code == 400, reply.text
    assert "messages[0].content[1]" in reply.json()["error"]["message"]


def test_without_a_recognizer_an_audio_part_is_still_refused(default_server, qwen3_path, wav):
    body = {"model": model_name(qwen3_path), "messages": _messages(wav), "max_tokens": 4}
    reply = httpx.post(f"{default_server.url}/v1/chat/completions", json=body,
                       headers=default_server.headers, timeout=120)  # fmt: skip
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "messages[0].content[1].type"


def test_an_audio_url_part_is_heard_as_the_same_audio_inline(full_server, qwen3_path, wav):
    """vLLM's `audio_url` part (here a data URL; http(s) URLs are fetched under the image
    rules) is the same audio as an `input_audio` part: the same answer."""
    url = "data:audio/wav;base64," + base64.b64encode(wav).decode()
    by_url = [{"role": "user", "content": [{"type": "text", "text": "Answer this:"},
                                           {"type": "audio_url", "audio_url": {"url": url}}]}]  # fmt: skip
    heard = _chat(full_server, qwen3_path, by_url)
    inline = _chat(full_server, qwen3_path, _messages(wav))
    assert heard.choices[0].message.content == inline.choices[0].message.content
    assert heard.usage.prompt_tokens_details.model_extra["transcribed_audio_parts"] == 1


@pytest.mark.parametrize(
    "url, says",
    [
        ("data:audio/wav;base64," + base64.b64encode(b"not audio").decode(), "is none of"),
        ("http://127.0.0.1:9/a.wav", "only public addresses are fetched"),
    ],
)
def test_an_audio_url_that_is_not_audio_or_not_public_is_a_400(full_server, qwen3_path, url, says):
    part = {"type": "audio_url", "audio_url": {"url": url}}
    body = {"model": model_name(qwen3_path), "max_tokens": 4,
            "messages": [{"role": "user", "content": [part]}]}  # fmt: skip
    reply = httpx.post(f"{full_server.url}/v1/chat/completions", json=body,
                       headers=full_server.headers, timeout=120)  # fmt: skip
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert says in error["message"] and error["param"] == "messages[0].content[0].audio_url.url"
