"""Chat completions with audio out (`modalities: ["text", "audio"]`) through the official
openai SDK, against the real processes: the transcript is the text the same request gets
without audio, the audio decodes, a stream's audio starts while its text still comes, and a
later turn can name the answer by its audio id."""

from __future__ import annotations

import base64
import io
import wave

import openai
import pytest

from tests.support.server import model_name, openai_client

MESSAGES = [{"role": "user", "content": "Tell me about the sea."}]
# Long enough that the first phrase's audio comes while the text still streams, even on a
# loaded machine with speculation speeding the text (600 tokens lost that race once in 5 runs).
ANSWER_TOKENS = 1500
AUDIO = {"voice": "vivian", "format": "wav"}


def _plain(client, model: str, max_tokens: int) -> str:
    reply = client.chat.completions.create(
        model=model, messages=MESSAGES, max_tokens=max_tokens, temperature=0
    )
    return reply.choices[0].message.content


def test_a_spoken_answer_is_the_text_and_its_audio(full_server, qwen3_path):
    client = openai_client(full_server)
    model = model_name(qwen3_path)
    reply = client.chat.completions.create(
        model=model, messages=MESSAGES, max_tokens=32, temperature=0,
        modalities=["text", "audio"], audio=AUDIO,
    )  # fmt: skip
    message = reply.choices[0].message
    assert message.content is None and message.audio.id.startswith("audio_")
    assert message.audio.transcript == _plain(client, model, 32)
    assert message.audio.expires_at > 0 and reply.usage.completion_tokens == 32
    with wave.open(io.BytesIO(base64.b64decode(message.audio.data))) as wav:
        seconds = wav.getnframes() / wav.getframerate()
    assert 0.1 < seconds < 120


def test_a_streamed_spoken_answer_sends_audio_while_its_text_still_comes(full_server, qwen3_path):
    client = openai_client(full_server)
    model = model_name(qwen3_path)
    events, pcm, ids = [], b"", []
    for chunk in client.chat.completions.create(
        model=model, messages=MESSAGES, max_tokens=ANSWER_TOKENS, temperature=0, stream=True,
        modalities=["text", "audio"], audio={"voice": "vivian", "format": "pcm16"},
    ):  # fmt: skip
        if not chunk.choices or chunk.choices[0].delta.audio is None:
            continue
        audio = chunk.choices[0].delta.audio
        audio = audio if isinstance(audio, dict) else audio.model_dump()
        ids += [audio["id"]] if audio.get("id") else []
        if audio.get("transcript"):
            events.append(("text", audio["transcript"]))
        if audio.get("data"):
            pcm += base64.b64decode(audio["data"])
            events.append(("audio", None))
    transcript = "".join(text for kind, text in events if kind == "text")
    assert transcript == _plain(client, model, ANSWER_TOKENS)
    assert len(ids) == 1 and len(pcm) > 0 and len(pcm) % 2 == 0
    kinds = [kind for kind, _ in events]
    last_text = len(kinds) - 1 - kinds[::-1].index("text")
    assert kinds.index("audio") < last_text  # the first phrase spoke before the text ended


def test_a_later_turn_names_a_spoken_answer_by_its_audio_id(full_server, qwen3_path):
    client = openai_client(full_server)
    model = model_name(qwen3_path)
    message = client.chat.completions.create(
        model=model, messages=MESSAGES, max_tokens=12, temperature=0,
        modalities=["text", "audio"], audio=AUDIO,
    ).choices[0].message  # fmt: skip
    follow = [{"role": "user", "content": "More."}]
    by_id = client.chat.completions.create(
        model=model, max_tokens=4, temperature=0,
        messages=[*MESSAGES, {"role": "assistant", "audio": {"id": message.audio.id}}, *follow],
    )  # fmt: skip
    by_text = client.chat.completions.create(
        model=model, max_tokens=4, temperature=0,
        messages=[*MESSAGES, {"role": "assistant", "content": message.audio.transcript}, *follow],
    )  # fmt: skip
    assert by_id.usage.prompt_tokens == by_text.usage.prompt_tokens
    assert by_id.choices[0].message.content == by_text.choices[0].message.content


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"modalities": ["text", "audio"]}, "audio"),
        ({"audio": AUDIO}, "audio"),
        ({"modalities": ["text", "audio"], "audio": {"voice": "nobody", "format": "wav"}},
         "audio.voice"),
        ({"modalities": ["text", "audio"], "audio": {"voice": "vivian", "format": "ogg"}},
         "audio.format"),
        ({"modalities": ["text", "audio"], "audio": AUDIO, "stream": True}, "audio.format"),
        ({"modalities": ["text", "audio"], "audio": AUDIO, "n": 2}, "n"),
    ],
)  # fmt: skip
def test_a_bad_audio_request_is_a_400_naming_the_field(full_server, qwen3_path, extra, param):
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client(full_server).chat.completions.create(
            model=model_name(qwen3_path), messages=MESSAGES, max_tokens=2, **extra
        )
    assert caught.value.body["param"] == param


def test_an_unknown_audio_id_is_a_400_naming_it(full_server, qwen3_path):
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client(full_server).chat.completions.create(
            model=model_name(qwen3_path), max_tokens=2,
            messages=[*MESSAGES, {"role": "assistant", "audio": {"id": "audio_nope"}}],
        )  # fmt: skip
    assert caught.value.body["param"] == "messages[1].audio.id"


def test_audio_out_without_a_tts_model_is_a_400_naming_modalities(default_server, qwen3_path):
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client(default_server).chat.completions.create(
            model=model_name(qwen3_path), messages=MESSAGES, max_tokens=2,
            modalities=["text", "audio"], audio=AUDIO,
        )  # fmt: skip
    assert caught.value.body["param"] == "modalities"
