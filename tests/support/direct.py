"""What mlx-lm, mlx-vlm and mlx-audio produce when called directly: the references the server
must equal."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

from mlx_lm import load
from mlx_lm import stream_generate as _stream_generate
from mlx_lm.sample_utils import make_sampler

from tests.support.speech import TEXT
from worker.text.laned_attention import uninstalled


@dataclass
class DirectResult:
    text: str
    tokens: list[int]
    prompt_tokens: int
    finish_reason: str


def assert_chat_equals(reply, expected: DirectResult, max_tokens: int) -> None:
    """A non-streamed chat completion equals the direct greedy run that reached max_tokens:
    the same text, finish reason "length", and the direct run's prompt and completion counts."""
    assert reply.choices[0].message.content == expected.text
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.prompt_tokens == expected.prompt_tokens
    assert reply.usage.completion_tokens == len(expected.tokens) == max_tokens


def stream_generate(*args, **kwargs) -> list:
    """mlx-lm's `stream_generate`, run to its end with mlx-lm's own attention (a process that
    loaded a model through the worker has worker/text/laned_attention.py's installed)."""
    with uninstalled():
        return list(_stream_generate(*args, **kwargs))


@lru_cache(maxsize=4)
def load_model(path: str):
    return load(path)


def chat_prompt(path: str, messages: list[dict]) -> list[int]:
    """The prompt a user of mlx-lm builds: the checkpoint's chat template, generation prompt on."""
    _, tokenizer = load_model(path)
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    return list(prompt["input_ids"] if isinstance(prompt, dict) else prompt)


def greedy(path: str, prompt: str | list[int], max_tokens: int) -> DirectResult:
    model, tokenizer = load_model(path)
    text, tokens, last = "", [], None
    for last in stream_generate(
        model, tokenizer, prompt, max_tokens=max_tokens, sampler=make_sampler(0.0)
    ):
        text += last.text
        tokens.append(last.token)
    return DirectResult(text, tokens, last.prompt_tokens, last.finish_reason)


def greedy_chat(path: str, messages: list[dict], max_tokens: int) -> DirectResult:
    return greedy(path, chat_prompt(path, messages), max_tokens)


@lru_cache(maxsize=2)
def load_vlm(path: str):
    """mlx-vlm's load of a local checkpoint (offline: its processors probe the hub otherwise)."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from mlx_vlm import load as vlm_load

    return vlm_load(path)


def greedy_vlm_chat(
    path: str, messages: list[dict], images: list[bytes], max_tokens: int
) -> DirectResult:
    """What a user of mlx-vlm gets: apply_chat_template + generate on image files, greedy.

    `messages` use mlx-vlm's part shape ({"type": "text", "text": ...} / {"type": "image"});
    the images are written to files, which is how mlx-vlm's own CLI and examples pass them.
    """
    import tempfile
    from pathlib import Path

    from mlx_vlm import generate
    from mlx_vlm.prompt_utils import apply_chat_template

    model, processor = load_vlm(path)
    prompt = apply_chat_template(processor, model.config, messages, num_images=len(images))
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, data in enumerate(images):
            file = Path(tmp) / f"image{i}.png"
            file.write_bytes(data)
            files.append(str(file))
        result = generate(
            model, processor, prompt, image=files, max_tokens=max_tokens, temperature=0.0
        )
    return DirectResult(
        result.text, list(result.token_ids), result.prompt_tokens, result.finish_reason
    )


@cache
def direct_tts_model(path: str):
    """mlx-audio's model, prepared as the worker prepares it at start (the family's `prepare`:
    a Qwen3-TTS codec in its faster CPU forms, worker/speech/qwen3_codec_fast.py, the stock math
    to float rounding; MOSS-TTS-Nano's codec built before any seeded call)."""
    from mlx_audio.tts.utils import load_model

    from worker.speech.families import family_for

    model = load_model(Path(path))
    family_for(Path(path)).prepare(model)
    return model


def direct_pcm(path: str, seed: int, text: str = TEXT, **kwargs) -> bytes:
    """mlx-audio in this process, as the worker is documented to call it, as int16 PCM (a
    streamed Qwen3-TTS call decoded in the server's chunks: tests/support/speech.py)."""
    import mlx.core as mx

    from tests.support.speech import generated_audio
    from worker.speech.audio import to_pcm16

    model = direct_tts_model(path)
    mx.random.seed(seed)
    return b"".join(to_pcm16(a) for a in generated_audio(model, text=text, **kwargs))
