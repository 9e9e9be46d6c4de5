"""Helpers of the image- and audio-in chat tests: deterministic PNG pictures, the message shapes
of the OpenAI API and of mlx-vlm, and a `VisionEngine` driven in-process (unit tests).
"""

from __future__ import annotations

import base64
import io
import struct
import zlib
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


def png_header_only(width: int, height: int) -> bytes:
    """A PNG that declares width x height but holds (almost) no data: a decompression bomb's
    header. Decoding it would allocate width*height*3 bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 16)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


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
    videos: Sequence[bytes] = (),
    logprobs: int | None = None,
    stream: bool = False,
) -> Submit:
    """A greedy chat Submit about these images, audio and video files (not streamed unless
    `stream`)."""
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, logprobs=logprobs)
    inputs = ChatInputs(
        messages, params, images=list(images), audios=list(audios), videos=list(videos)
    )
    return Submit(rid, inputs, stream=stream)


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


def direct_vlm_tokens(
    path: str, images: list[bytes], text: str, max_tokens: int, **kwargs: Any
) -> list[int]:
    """Greedy tokens of mlx-vlm called directly (its own load, apply_chat_template and
    stream_generate on the PIL images, with `kwargs`) for `mlx_vlm_message(text,
    len(images))`."""
    from mlx_vlm import stream_generate
    from mlx_vlm.prompt_utils import apply_chat_template

    model, processor = _mlx_vlm_load(path)
    messages = [mlx_vlm_message(text, len(images))]
    prompt = apply_chat_template(processor, model.config, messages, num_images=len(images))
    pictures = [Image.open(io.BytesIO(b)) for b in images]
    results = list(
        stream_generate(
            model,
            processor,
            prompt,
            image=pictures,
            max_tokens=max_tokens,
            temperature=0.0,
            **kwargs,
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


def mp4(
    seed: int,
    frames: int = 8,
    size: tuple[int, int] = (64, 48),
    fps: float = 4.0,
    noise: bool = True,
) -> bytes:
    """A deterministic clip of noise frames (else black ones, which compress to almost nothing)
    of `size` (width, height), MPEG-4 in an MP4 file (OpenCV's writer, the library mlx-vlm
    reads videos with)."""
    import tempfile
    from pathlib import Path

    import cv2

    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "clip.mp4")
        writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"mp4v"), fps, size)
        for _ in range(frames):
            shape = (size[1], size[0], 3)
            writer.write(
                rng.integers(0, 256, shape, dtype=np.uint8) if noise else np.zeros(shape, np.uint8)
            )
        writer.release()
        return Path(path).read_bytes()


def openai_video_message(
    text: str, video: bytes, video_first: bool = True, **sampling: Any
) -> dict:
    """A user message in the OpenAI (vLLM) shape: the clip as a `video_url` data URL, then the
    text (or the text first); `sampling` (fps, max_frames) goes into the part."""
    url = "data:video/mp4;base64," + base64.b64encode(video).decode()
    parts = [{"type": "video_url", "video_url": {"url": url, **sampling}},
             {"type": "text", "text": text}]  # fmt: skip
    return {"role": "user", "content": parts if video_first else parts[::-1]}


def direct_vlm_video_chat(
    path: str, video: bytes, text: str, max_tokens: int, **sampling: Any
) -> dict[str, Any]:
    """Greedy output of mlx-vlm called directly on a video file, as its own CLI does it: with a
    processor that takes video, `apply_chat_template(..., video=[file], fps=...)` and
    `stream_generate(..., video=[file], **sampling)`; else the frames as stills
    (`resolve_video_inputs(..., fps, max_frames)`) and `stream_generate(..., image=stills)`.
    Its tokens, text and prompt token count."""
    import tempfile
    from pathlib import Path

    from mlx_vlm import stream_generate
    from mlx_vlm.generate.video import processor_handles_video, resolve_video_inputs
    from mlx_vlm.prompt_utils import apply_chat_template

    model, processor = _mlx_vlm_load(path)
    with tempfile.TemporaryDirectory() as tmp:
        file = str(Path(tmp) / "clip.mp4")
        Path(file).write_bytes(video)
        fps = sampling.get("fps", 2.0)
        if processor_handles_video(processor):
            prompt = apply_chat_template(processor, model.config, text, video=[file], fps=fps)
            media: dict[str, Any] = {"video": [file], **sampling}
        else:
            stills = resolve_video_inputs(
                processor, [file], fps=fps, max_frames=sampling["max_frames"]
            ).images
            prompt = apply_chat_template(processor, model.config, text, num_images=len(stills))
            media = {"image": stills}
        results = list(
            stream_generate(
                model, processor, prompt, max_tokens=max_tokens, temperature=0.0, **media
            )
        )
    return {"tokens": list(results[-1].token_ids), "text": "".join(r.text for r in results),
            "prompt_tokens": results[-1].prompt_tokens}  # fmt: skip
