"""Audio into chat on the mlx-vlm engine (tiny Qwen3-Omni thinker): equal to direct mlx-vlm.

The reference is mlx-vlm called the way its users call it: `load`, `apply_chat_template(...,
num_audios=1)` and `stream_generate(..., audio=[file])` on the same file written to disk.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.messages import ErrorCode, FinishReason, Submit
from tests.support.omni_audio import mp3_bytes, wav_bytes
from tests.support.vision import chat_submit, png, run_all
from worker.tiny_models import ensure_checkpoint

pytest.importorskip("mlx_vlm")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from worker.vision.engine import VisionEngine, make_text_prefix_caches  # noqa: E402
from worker.vision.model import load_vision_model  # noqa: E402

QUESTION = "What is said here?"
MAX_TOKENS = 10


def audio_message(text: str = QUESTION, images: int = 0) -> dict:
    parts = [{"type": "text", "text": text}, {"type": "audio"}] + [{"type": "image"}] * images
    return {"role": "user", "content": parts}


def submit(
    rid: str, audios: list[bytes], images: list[bytes] = (), logprobs: int | None = None
) -> Submit:
    messages = [audio_message(images=len(images))]
    return chat_submit(
        rid, messages, max_tokens=MAX_TOKENS, images=images, audios=audios, logprobs=logprobs
    )


@pytest.fixture(scope="module")
def path() -> str:
    return str(ensure_checkpoint("qwen3_omni_moe"))


@pytest.fixture(scope="module")
def vm(path):
    return load_vision_model(path)


@pytest.fixture
def engine(vm) -> VisionEngine:
    return VisionEngine(vm, prefill_step_size=2048)


@pytest.fixture(scope="module")
def direct(path):
    """(model, processor) from mlx-vlm's own `load`."""
    from mlx_vlm import load

    return load(path)


def direct_tokens(
    direct, tmp_path: Path, audio: bytes, suffix: str, image: bytes | None = None
) -> list[int]:
    from mlx_vlm import stream_generate
    from mlx_vlm.prompt_utils import apply_chat_template

    model, processor = direct
    audio_file = tmp_path / f"clip.{suffix}"
    audio_file.write_bytes(audio)
    images = []
    if image is not None:
        images = [tmp_path / "picture.png"]
        images[0].write_bytes(image)
    messages = [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]
    messages[0]["content"] += [{"type": "image"}] * len(images)
    prompt = apply_chat_template(
        processor, model.config, messages, num_images=len(images), num_audios=1
    )
    results = list(
        stream_generate(
            model,
            processor,
            prompt,
            image=[str(p) for p in images] or None,
            audio=[str(audio_file)],
            max_tokens=MAX_TOKENS,
            temperature=0.0,
        )
    )
    return results[-1].token_ids


def test_checkpoint_declares_audio_and_image_input(engine):
    assert "audio_in" in engine.capabilities()
    assert "image_in" in engine.capabilities()
    assert engine.ready_info().max_context == 4096


def test_backend_auto_picks_mlx_vlm_for_the_omni_checkpoint(path):
    from worker.runtime.loading import VISION, main_model_kind

    assert main_model_kind(path) == VISION


def test_wav_greedy_tokens_equal_direct_mlx_vlm(engine, direct, tmp_path):
    audio = wav_bytes(0)
    got = run_all(engine, submit("a", [audio]))["a"]
    assert got["tokens"] == direct_tokens(direct, tmp_path, audio, "wav")
    assert got["end"].finish_reason == FinishReason.LENGTH
    assert got["end"].usage.completion_tokens == MAX_TOKENS


def test_stereo_44khz_wav_is_read_like_mlx_vlm_reads_it(engine, direct, tmp_path):
    # Downmix and resampling must be mlx-vlm's (mean of channels, then mlx-audio's resampler).
    audio = wav_bytes(1, seconds=1.5, rate=44100, channels=2)
    got = run_all(engine, submit("a", [audio], logprobs=0))["a"]
    assert got["tokens"] == direct_tokens(direct, tmp_path, audio, "wav")


def test_mp3_greedy_tokens_equal_direct_mlx_vlm(engine, direct, tmp_path):
    audio = mp3_bytes(2)
    got = run_all(engine, submit("a", [audio]))["a"]
    assert got["tokens"] == direct_tokens(direct, tmp_path, audio, "mp3")


def test_audio_and_image_together_equal_direct_mlx_vlm(engine, direct, tmp_path):
    audio, image = wav_bytes(3), png(0)
    got = run_all(engine, submit("a", [audio], [image]))["a"]
    assert got["tokens"] == direct_tokens(direct, tmp_path, audio, "wav", image)


def test_the_thinkers_audio_and_vision_towers_run_a_block_a_step(vm, engine, direct, tmp_path):
    # Qwen3-Omni keeps its towers on its thinker: each block of both is a unit of prefill,
    # so a request beside this one waits for one block, not for both encoders.
    thinker = vm.model.thinker
    blocks = len(thinker.audio_tower.layers) + len(thinker.vision_tower.blocks)
    audio, image = wav_bytes(6), png(1)
    assert engine.admit(submit("a", [audio], [image])).finish_reason is None
    steps_before_a_token, tokens = 0, []
    while engine.active_ids():
        got = [t for d in engine.step() for t in d.token_ids]
        steps_before_a_token += not tokens and not got
        tokens += got
    assert steps_before_a_token >= blocks >= 2
    assert tokens == direct_tokens(direct, tmp_path, audio, "wav", image)


def test_different_audio_of_the_same_length_gives_different_answers(engine):
    got = run_all(engine, submit("a", [wav_bytes(4)]), submit("b", [wav_bytes(5)]))
    assert got["a"]["end"].usage.prompt_tokens == got["b"]["end"].usage.prompt_tokens
    assert got["a"]["tokens"] != got["b"]["tokens"]


def test_audio_requests_with_the_prefix_cache_on_equal_plain_ones(vm):
    # mlx-vlm's APC mishandles audio prompts (worker/vision/engine.py): they must bypass it.
    apc, text_prefix = make_text_prefix_caches(vm, 64 << 20)
    cached = VisionEngine(vm, 2048, apc, text_prefix=text_prefix)
    plain = VisionEngine(vm, 2048, None)
    order = [wav_bytes(6), wav_bytes(7), wav_bytes(6)]
    with_cache = [
        run_all(cached, submit(f"r{i}", [a]))[f"r{i}"]["tokens"] for i, a in enumerate(order)
    ]
    without = [run_all(plain, submit(f"r{i}", [a]))[f"r{i}"]["tokens"] for i, a in enumerate(order)]
    assert with_cache == without
    assert with_cache[0] != with_cache[1]


@pytest.mark.parametrize(
    ("audio", "needle"),
    [
        (b"RIFF\x24\x00\x00\x00WAVEfmt not really a wav", "audios[0] is not decodable audio"),
        (b"plain text, no audio at all", "audios[0] is not decodable audio"),
        (b"", "audios[0] is empty"),
    ],
)
def test_corrupt_audio_is_a_bad_request_and_the_engine_goes_on(engine, audio, needle):
    bad = engine.admit(submit("bad", [audio]))
    assert bad.finish_reason == FinishReason.ERROR
    assert bad.error.code == ErrorCode.BAD_REQUEST
    assert needle in bad.error.message
    ok = run_all(engine, submit("ok", [wav_bytes(0)]))["ok"]
    assert ok["end"].finish_reason == FinishReason.LENGTH


def test_audio_parts_must_match_the_audio_files(engine):
    delta = engine.admit(submit("x", [wav_bytes(0), wav_bytes(1)]))
    assert delta.error is not None and delta.error.code == ErrorCode.BAD_REQUEST
    assert "1 audio parts but 2 audio files" in delta.error.message
