"""A media Submit -> the exact inputs mlx-vlm would build for the same messages and files.

The prompt text is `mlx_vlm.prompt_utils.apply_chat_template(processor, config, messages,
num_images=..., num_audios=...)`; images are read the way `mlx_vlm.utils.load_image` reads a
file (EXIF rotation applied, RGB) and audio the way `mlx_vlm.utils.load_audio` reads one
(mono float32 at the processor's sampling rate); then `mlx_vlm.utils.prepare_inputs` tokenizes
the prompt and preprocesses the media with the same arguments `mlx_vlm.stream_generate` gives
it. The engine hands the result to `stream_generate` as caller-prepared inputs (its
`input_ids=` path), so the work is not done twice and the prompt's token ids are known before
generation (usage, context limit).

Message content is a string or a list of parts {"type": "text" | "image" | "audio" | "video"}
(the gateway/worker contract); "images" / "audios" / "videos" hold the encoded files in order
of appearance. mlx-vlm renders images and videos only in user turns and places all audio in
the last user turn, so media elsewhere is refused (RequestError) rather than silently moved or
dropped. Videos: worker/vision/video.py (their frames, and their place in the prompt).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import numpy as np
from jinja2 import TemplateError
from msgspec.structs import replace

from protocol.inputs import VIDEO_MAX_FRAMES_DEFAULT, ChatInputs, CompleteInputs, Inputs
from worker.runtime.errors import bad_request, context_length
from worker.text.prompts import chat_messages, chat_tools, template_kwargs
from worker.text.tool_fallback import template_renders_tools, with_tools_in_messages
from worker.vision.model import VisionModel
from worker.vision.video import (
    DecodedVideo,
    PixelBudget,
    decode_stills,
    decode_videos,
    with_video_items,
)

_PART_TYPES = ("text", "image", "audio", "video")
# Keys the template call sets itself; a client may not override them.
_RESERVED_TEMPLATE_KWARGS = frozenset(
    {"conversation", "messages", "add_generation_prompt", "tokenize", "return_dict", "tools"}
    | {"num_images", "num_audios", "return_messages", "prompt", "config", "processor"}
    | {"video", "fps", "max_pixels"}  # mlx-vlm would add video items the request has no file for
)


@dataclass
class VisionInputs:
    """What `stream_generate` gets for one request (see the module docstring)."""

    prompt: str
    token_ids: list[int]
    images: list[Any] = field(default_factory=list)  # PIL images
    audios: list[Any] = field(default_factory=list)  # float32 numpy arrays
    videos: list[DecodedVideo] = field(default_factory=list)
    tensors: dict[str, Any] = field(default_factory=dict)  # input_ids, pixel_values, mask, ...


def build_vision_inputs(vm: VisionModel, inputs: Inputs) -> VisionInputs:
    """Validates a Submit's inputs and prepares them; RequestError when they are bad."""
    if isinstance(inputs, ChatInputs):
        images = _decode_images(vm, inputs.images)
        audios = _decode_audios(vm, inputs.audios)
        sampling = _video_sampling(inputs, vm)
        if sampling and not vm.video_processor:
            inputs, images = _videos_as_stills(inputs, images, sampling)
            sampling = []
        prompt = chat_prompt_text(vm, inputs, len(images), len(audios))
        videos = decode_videos(vm.processor, inputs.videos, sampling)
        return prepare(vm, prompt, images, audios, videos)
    if isinstance(inputs, CompleteInputs):
        if not isinstance(inputs.prompt, str):
            raise bad_request("prompt must be a string for this model")
        return prepare(vm, inputs.prompt, [], [])
    raise bad_request(f"operation {inputs.op!r} is not supported by this model (chat, complete)")


def _video_sampling(inputs: ChatInputs, vm: VisionModel) -> list[dict]:
    """Each video part's frame sampling ("fps", "max_frames"), in order; the videos checked
    against the model and the parts."""
    videos = inputs.videos
    if not isinstance(videos, list) or not all(isinstance(b, bytes) for b in videos):
        raise bad_request("videos must be a list of encoded video files")
    if videos and not vm.takes_images:
        raise bad_request("this model does not accept video input")
    sampling = []
    for message in chat_messages(inputs):
        content = message.get("content") if isinstance(message, Mapping) else None
        for part in content if isinstance(content, list) else []:
            if isinstance(part, Mapping) and part.get("type") == "video":
                sampling.append({k: part[k] for k in ("fps", "max_frames") if part.get(k)})
    if len(sampling) != len(videos):
        raise bad_request(f"the messages have {len(sampling)} video parts but {len(videos)} videos")
    return sampling


def _videos_as_stills(
    inputs: ChatInputs, images: list[Any], sampling: list[dict]
) -> tuple[ChatInputs, list[Any]]:
    """For a processor that takes no video: each video part becomes its frames as image parts,
    in place (worker/vision/video.py decode_stills), and the images list follows the parts."""
    pictures, stills, budget = iter(images), iter(range(len(sampling))), PixelBudget()
    ordered: list[Any] = []
    messages = []
    for m, message in enumerate(chat_messages(inputs)):
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            messages.append(message)
            continue
        parts = []
        for part in content:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind == "image":
                ordered.append(next(pictures, None))
            elif kind == "video":
                if message.get("role") != "user":
                    raise bad_request(f"messages[{m}]: videos are accepted only in user messages")
                i = next(stills)
                frame_budget = sampling[i].get("max_frames") or VIDEO_MAX_FRAMES_DEFAULT
                fps = sampling[i].get("fps")
                frames = decode_stills(i, inputs.videos[i], fps, frame_budget, budget)
                ordered += frames
                parts += [{"type": "image"}] * len(frames)
                continue
            parts.append(part)
        messages.append({**message, "content": parts})
    if None in ordered or next(pictures, None) is not None:
        raise bad_request(f"the messages' image parts do not match the {len(images)} images")
    return replace(inputs, messages=messages, videos=[]), ordered


def chat_prompt_text(vm: VisionModel, inputs: ChatInputs, n_images: int, n_audios: int) -> str:
    """The chat prompt mlx-vlm's apply_chat_template renders for these messages."""
    from mlx_vlm.prompt_utils import apply_chat_template

    converted = _convert_messages(chat_messages(inputs), n_images, n_audios)
    kwargs = template_kwargs(inputs, _RESERVED_TEMPLATE_KWARGS)
    tools = chat_tools(inputs)
    if tools and not template_renders_tools(vm.tokenizer):
        # The template would drop them unseen: they go into the messages as a Hermes block
        # (worker/text/tool_fallback.py; build_features reads Hermes calls back), tool results
        # as user turns, which would take mlx-vlm's audio (it goes to the last user turn).
        if n_audios and _tool_turn_after_last_user(converted):
            raise bad_request(
                "audio with tool results after it needs a chat template that renders tools; "
                "this model's does not (its tools and results are written into the messages)"
            )
        converted, tools = with_tools_in_messages(converted, tools), []
    if tools:
        kwargs["tools"] = list(tools)
    try:
        if inputs.videos:  # the parts were counted against them (_video_sampling)
            prompt = _prompt_with_videos(vm, converted, n_images, n_audios, kwargs)
        else:
            prompt = apply_chat_template(
                vm.processor,
                vm.model.config,
                converted,
                num_images=n_images,
                num_audios=n_audios,
                **kwargs,
            )
    except (TemplateError, ValueError, TypeError) as exc:
        raise bad_request(f"the chat template rejected the messages: {exc}") from exc
    if not isinstance(prompt, str):
        raise bad_request("the chat template did not produce a text prompt")
    return prompt


def _prompt_with_videos(
    vm: VisionModel, converted: list[dict], n_images: int, n_audios: int, kwargs: dict
) -> Any:
    """mlx-vlm's messages without the video parts, the video items put back in place, rendered
    (worker/vision/video.py)."""
    from mlx_vlm.prompt_utils import apply_chat_template, get_chat_template

    parts_of = {i: m["content"] for i, m in enumerate(converted) if isinstance(m["content"], list)}
    stripped = [
        {**m, "content": [p for p in m["content"] if p["type"] != "video"]} if i in parts_of else m
        for i, m in enumerate(converted)
    ]
    messages = apply_chat_template(
        vm.processor, vm.model.config, stripped, num_images=n_images, num_audios=n_audios,
        return_messages=True, **kwargs,
    )  # fmt: skip
    if not isinstance(messages, list):
        raise bad_request("the chat template did not produce messages for the video parts")
    if vm.model.config.model_type == "qwen3_omni_moe":  # as apply_chat_template sets it
        kwargs.setdefault("enable_thinking", True)
    return get_chat_template(
        vm.processor, with_video_items(messages, parts_of), add_generation_prompt=True, **kwargs
    )


def _tool_turn_after_last_user(messages: list[dict]) -> bool:
    roles = [m["role"] for m in messages]
    last_user = max((i for i, role in enumerate(roles) if role == "user"), default=-1)
    return "tool" in roles[last_user + 1 :]


def _convert_messages(messages: list[Any], n_images: int, n_audios: int) -> list[dict]:
    """Contract messages -> mlx-vlm's message dicts; checks parts against the media lists (the
    video parts were counted by _video_sampling)."""
    converted: list[dict] = []
    images = audios = 0
    last_user = max(
        (i for i, m in enumerate(messages) if isinstance(m, Mapping) and m.get("role") == "user"),
        default=-1,
    )
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise bad_request(f"messages[{i}] must be an object with a string 'role'")
        message = dict(message)
        if message["role"] == "developer":
            message["role"] = "system"
        content = message.get("content")
        if content is None and message.get("tool_calls"):
            content = ""
        if isinstance(content, list):
            parts, n_img, n_aud = _convert_parts(i, content)
            if n_img and message["role"] != "user":
                raise bad_request(f"messages[{i}]: images are accepted only in user messages")
            if message["role"] != "user" and any(p["type"] == "video" for p in parts):
                raise bad_request(f"messages[{i}]: videos are accepted only in user messages")
            if n_aud and i != last_user:
                raise bad_request(f"messages[{i}]: audio is accepted only in the last user message")
            images, audios = images + n_img, audios + n_aud
            # mlx-vlm adds the audio markers itself (num_audios); only text and images stay.
            content = parts
        elif not isinstance(content, str):
            raise bad_request(f"messages[{i}].content must be a string or a list of parts")
        message["content"] = content
        converted.append(message)
    if images != n_images:
        raise bad_request(f"the messages have {images} image parts but {n_images} images")
    if audios != n_audios:
        raise bad_request(f"the messages have {audios} audio parts but {n_audios} audio files")
    return converted


def _convert_parts(i: int, content: list[Any]) -> tuple[list[dict], int, int]:
    parts: list[dict] = []
    n_img = n_aud = 0
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in _PART_TYPES:
            raise bad_request(
                f"messages[{i}].content[{j}] must be a part of type {', '.join(_PART_TYPES)}"
            )
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise bad_request(f"messages[{i}].content[{j}].text must be a string")
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "image":
            parts.append({"type": "image"})
            n_img += 1
        elif kind == "video":
            parts.append({"type": "video"})
        else:
            n_aud += 1
    return parts, n_img, n_aud


def _decode_images(vm: VisionModel, images: Any) -> list[Any]:
    if not isinstance(images, list) or not all(isinstance(b, bytes) for b in images):
        raise bad_request("images must be a list of encoded image files")
    if images and not vm.takes_images:
        raise bad_request("this model does not accept image input")
    from mlx_vlm.utils import load_image

    decoded = []
    for i, data in enumerate(images):
        try:
            image = load_image(io.BytesIO(data))
        except Exception as exc:  # Pillow raises many types for a bad file
            raise bad_request(f"images[{i}] is not a decodable image: {exc}") from None
        decoded.append(image)
    return decoded


def _decode_audios(vm: VisionModel, audios: Any) -> list[Any]:
    if not isinstance(audios, list) or not all(isinstance(b, bytes) for b in audios):
        raise bad_request("audios must be a list of encoded audio files")
    if audios and not vm.takes_audio:
        raise bad_request("this model does not accept audio input")
    if len(audios) > 1 and not getattr(vm.processor, "supports_multiple_audio", False):
        # mlx-vlm would keep only the first one.
        raise bad_request("this model takes at most one audio file per request")
    return [_decode_audio(i, data, vm.audio_sample_rate) for i, data in enumerate(audios)]


def _decode_audio(i: int, data: bytes, sample_rate: int) -> Any:
    """Mono float32 samples exactly as `mlx_vlm.utils.load_audio` reads a file: decoded at
    the file's own rate, channels averaged, then resampled with mlx-audio's resampler (the
    decoder's built-in resampling and downmix would give other samples)."""
    from mlx_vlm.utils import load_audio

    if not data:
        raise bad_request(f"audios[{i}] is empty")
    try:
        samples = load_audio(io.BytesIO(data), sample_rate)
    except Exception as exc:  # miniaudio, ffmpeg and format detection raise many types
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise bad_request(f"audios[{i}] is not decodable audio (WAV or MP3): {reason}") from None
    if samples.size == 0:
        raise bad_request(f"audios[{i}] decodes to no audio samples")
    if not np.isfinite(samples).all():
        raise bad_request(f"audios[{i}] decodes to invalid (non-finite) samples")
    return samples


def prepare(
    vm: VisionModel,
    prompt: str,
    images: Sequence[Any],
    audios: Sequence[Any],
    videos: Sequence[DecodedVideo] = (),
) -> Any:
    """Tokenizes and preprocesses exactly as `mlx_vlm.stream_generate` does (see above)."""
    from mlx_vlm.utils import prepare_inputs, should_add_special_tokens

    config = vm.model.config
    decoded = {}
    if videos:  # already decoded, with the metadata prepare_inputs would have read
        decoded = {"video_metadata": [v.metadata for v in videos]}
    try:
        prepared = prepare_inputs(
            vm.processor,
            images=list(images) or None,
            audio=list(audios) or None,
            videos=[v.frames for v in videos] or None,
            prompts=prompt,
            image_token_index=getattr(config, "image_token_index", None),
            resize_shape=None,
            add_special_tokens=should_add_special_tokens(config.model_type, vm.processor),
            **decoded,
        )
    except ValueError as exc:
        raise bad_request(f"the images, audio or video could not be processed: {exc}") from exc
    input_ids = prepared.get("input_ids")
    if input_ids is None or input_ids.size == 0:
        raise bad_request("the prompt is empty")
    tensors = {
        k: v
        for k, v in prepared.items()
        if k not in ("input_ids", "pixel_values", "attention_mask")
    }
    tensors |= {"input_ids": input_ids, "pixel_values": prepared.get("pixel_values")}
    mask = prepared.get("attention_mask")
    if mask is not None and (images or audios or videos or not bool(mx.all(mask == 1).item())):
        # A text-only prompt (one, so no padding: an all-ones mask) goes without its mask:
        # mlx-vlm folds a caller-given mask into its prefix-cache keys, and a mask spans the
        # whole prompt, so a follow-up turn would never match its earlier turn's blocks. Media
        # prompts keep it (Gemma 3 places image features with it); they never use those keys.
        tensors["mask"] = mask
    token_ids = [int(t) for t in input_ids.reshape(-1).tolist()]
    limit = vm.max_context
    if limit is not None and len(token_ids) >= limit:
        raise context_length(len(token_ids), limit)
    return VisionInputs(prompt, token_ids, list(images), list(audios), list(videos), tensors)
