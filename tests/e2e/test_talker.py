"""Qwen3-Omni speaking for itself: chat completions with audio out on an omni checkpoint with a
talker, through the official openai SDK, against the real processes. The text and the audio
equal mlx-vlm's `Model.generate_stream` called directly, greedy (temperature 0 for the thinker
and the talker), sample for sample; streamed joined equals not streamed; what the talker's
loop cannot honour is a 400 naming the field.

The checkpoint is the tiny Qwen3-Omni with a random talker and code2wav
(worker/tiny_models/omni.py, "talker"); a random talker never ends on its own, so the server
bounds it with `--talker-max-frames` (40 frames: 3.2 s at 24 kHz).
"""

from __future__ import annotations

import base64
import io
import wave

import numpy as np
import openai
import pytest

from tests.support import direct
from tests.support.server import model_name, openai_client
from worker.tiny_models import ensure_checkpoint

MAX_TOKENS = 12
FRAMES = 40
MESSAGES = [{"role": "user", "content": "Hello there"}]


@pytest.fixture(scope="module")
def talker_path() -> str:
    return str(ensure_checkpoint("qwen3_omni_moe", "talker"))


@pytest.fixture(scope="module")
def talker_server(start_server, talker_path):
    # The mlx wheel's own BLAS, as in this process: the references below run here, and
    # OpenBLAS (the worker's default) rounds differently.
    args = ("--talker-max-frames", str(FRAMES), "--blas", "bundled")
    return start_server(talker_path, *args, name="talker")


def direct_spoken(path: str, speaker: str) -> tuple[list[int], bytes]:
    """What a user of mlx-vlm gets: the chat template, the processor's ids, generate_stream
    greedy; the waveform as 16-bit PCM (the server's conversion: clip, x 32767)."""
    import mlx.core as mx
    from mlx_vlm.prompt_utils import apply_chat_template

    model, processor = direct.load_vlm(path)
    prompt = apply_chat_template(processor, model.config, MESSAGES)
    ids = mx.array([processor.tokenizer.encode(prompt)])
    tokens, chunks = [], []
    for kind, value in model.generate_stream(
        ids, speaker=speaker, thinker_max_new_tokens=MAX_TOKENS,
        thinker_eos_token_id=model.config.im_end_token_id, talker_max_new_tokens=FRAMES,
        talker_temperature=0.0, talker_top_p=1.0, thinker_temperature=0.0,
    ):  # fmt: skip
        if kind == "text":
            tokens = list(value)
        else:
            chunks.append(np.asarray(value, dtype=np.float32).reshape(-1))
    samples = np.concatenate(chunks)
    return tokens, (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


def spoken(server, path: str, voice: str = "Ethan", **extra):
    return openai_client(server).chat.completions.create(
        model=model_name(path), messages=MESSAGES, max_tokens=MAX_TOKENS, temperature=0,
        modalities=["text", "audio"], audio={"voice": voice, "format": extra.pop("fmt", "wav")},
        **extra,
    )  # fmt: skip


def pcm_of(wav_data: str) -> tuple[bytes, int]:
    with wave.open(io.BytesIO(base64.b64decode(wav_data))) as wav:
        return wav.readframes(wav.getnframes()), wav.getframerate()


def test_the_talker_speaks_what_direct_mlx_vlm_speaks_sample_for_sample(talker_server, talker_path):
    tokens, expected_pcm = direct_spoken(talker_path, "Ethan")
    reply = spoken(talker_server, talker_path)
    audio = reply.choices[0].message.audio
    pcm, rate = pcm_of(audio.data)
    assert rate == 24000 and len(pcm) == FRAMES * 1920 * 2
    assert pcm == expected_pcm
    model, processor = direct.load_vlm(talker_path)
    eos = model.config.im_end_token_id
    text_ids = [t for t in tokens if t != eos]
    assert audio.transcript == processor.tokenizer.decode(text_ids)
    assert reply.usage.completion_tokens == len(tokens)


def test_the_transcript_is_the_text_the_plain_chat_writes(talker_server, talker_path):
    client = openai_client(talker_server)
    plain = client.chat.completions.create(
        model=model_name(talker_path), messages=MESSAGES, max_tokens=MAX_TOKENS, temperature=0
    )
    assert spoken(talker_server, talker_path).choices[0].message.audio.transcript == (
        plain.choices[0].message.content
    )


def test_streamed_joined_equals_not_streamed(talker_server, talker_path):
    whole = spoken(talker_server, talker_path, voice="alloy").choices[0].message.audio
    text, pcm, ids = "", b"", []
    for chunk in spoken(talker_server, talker_path, voice="alloy", fmt="pcm16", stream=True):
        if not chunk.choices or chunk.choices[0].delta.audio is None:
            continue
        piece = chunk.choices[0].delta.audio
        piece = piece if isinstance(piece, dict) else piece.model_dump()
        ids += [piece["id"]] if piece.get("id") else []
        text += piece.get("transcript") or ""
        pcm += base64.b64decode(piece.get("data") or "")
    assert text == whole.transcript and len(ids) == 1
    assert pcm == pcm_of(whole.data)[0]  # alloy is female: Chelsie, both times


def test_an_openai_voice_name_picks_a_talker_speaker(talker_server, talker_path):
    alloy = spoken(talker_server, talker_path, voice="alloy").choices[0].message.audio
    chelsie = spoken(talker_server, talker_path, voice="Chelsie").choices[0].message.audio
    ethan = spoken(talker_server, talker_path, voice="echo").choices[0].message.audio
    assert pcm_of(alloy.data) == pcm_of(chelsie.data) != pcm_of(ethan.data)


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"voice": "vivian"}, "audio.voice"),
        ({"stop": ["x"]}, "stop"),
        ({"logprobs": True}, "logprobs"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"presence_penalty": 0.5}, "presence_penalty"),
    ],
)
def test_what_the_talker_cannot_honour_is_a_400_naming_it(talker_server, talker_path, extra, param):
    with pytest.raises(openai.BadRequestError) as error:
        spoken(talker_server, talker_path, **extra)
    assert error.value.body["param"] == param
