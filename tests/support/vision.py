"""Helpers of the image- and audio-in chat tests: deterministic PNG pictures, the message shapes
of the OpenAI API and of mlx-vlm, and a `VisionEngine` driven in-process (unit tests).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
from PIL import Image

from protocol.inputs import ChatInputs, SamplingParams
from protocol.messages import Submit


def png(seed: int, size: tuple[int, int] = (80, 64)) -> bytes:
    """A deterministic noise picture of `size` (width, height), PNG-encoded."""
    pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def openai_image_message(text: str, *images: bytes) -> dict:
    """A user message in the OpenAI shape: the text, then each picture as a data URL."""
    parts: list[dict] = [{"type": "text", "text": text}]
    parts += [{"type": "image_url", "image_url": {"url": data_url(i)}} for i in images]
    return {"role": "user", "content": parts}


def mlx_vlm_message(text: str, n_images: int = 1) -> dict:
    """The same user message as mlx-vlm's chat template and the worker take it."""
    return {
        "role": "user",
        "content": [{"type": "text", "text": text}] + [{"type": "image"}] * n_images,
    }


def chat_submit(
    rid: str,
    messages: list[dict],
    *,
    max_tokens: int,
    images: Sequence[bytes] = (),
    audios: Sequence[bytes] = (),
    logprobs: int | None = None,
) -> Submit:
    """A greedy, non-streaming chat Submit about these images and audio files."""
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, logprobs=logprobs)
    inputs = ChatInputs(messages, params, images=list(images), audios=list(audios))
    return Submit(rid, inputs, stream=False)


def run_all(engine: Any, *submits: Submit) -> dict[str, dict]:
    """Admits every Submit (each must be accepted), steps until all ended; per request:
    tokens, text, logprobs and the terminal Delta ("end")."""
    out = {s.request_id: {"tokens": [], "text": "", "logprobs": [], "end": None} for s in submits}
    for s in submits:
        accepted = engine.admit(s)
        assert accepted.finish_reason is None, accepted.error
    while engine.active_ids():
        for delta in engine.step():
            entry = out[delta.request_id]
            entry["tokens"] += delta.token_ids
            entry["text"] += delta.text
            entry["logprobs"] += [lp.logprob for lp in delta.logprobs or []]
            if delta.finish_reason is not None:
                entry["end"] = delta
    return out


@lru_cache(maxsize=1)
def _mlx_vlm_load(path: str) -> tuple[Any, Any]:
    from mlx_vlm import load

    return load(path)


def direct_vlm_tokens(path: str, images: list[bytes], text: str, max_tokens: int) -> list[int]:
    """Greedy tokens of mlx-vlm called directly (its own load, apply_chat_template and
    stream_generate on the PIL images) for `mlx_vlm_message(text, len(images))`."""
    from mlx_vlm import stream_generate
    from mlx_vlm.prompt_utils import apply_chat_template

    model, processor = _mlx_vlm_load(path)
    messages = [mlx_vlm_message(text, len(images))]
    prompt = apply_chat_template(processor, model.config, messages, num_images=len(images))
    pictures = [Image.open(io.BytesIO(b)) for b in images]
    results = list(
        stream_generate(
            model, processor, prompt, image=pictures, max_tokens=max_tokens, temperature=0.0
        )
    )
    return results[-1].token_ids


QUESTION = "What is this?"


def vision_submit(
    rid: str,
    images: list[bytes],
    messages: list[dict] | None = None,
    max_tokens: int = 10,
    logprobs: int | None = None,
) -> Submit:
    """Greedy chat about `images` (by default the question with one image part each)."""
    messages = messages or [mlx_vlm_message(QUESTION, len(images))]
    return chat_submit(rid, messages, images=images, max_tokens=max_tokens, logprobs=logprobs)
