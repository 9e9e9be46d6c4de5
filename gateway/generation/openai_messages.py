"""OpenAI chat `messages` -> the worker's messages; anything not representable is a 400.

Worker messages are `{"role": "system" | "user" | "assistant" | "tool", "content": str}` plus,
on assistant turns, `tool_calls` (OpenAI's shape, arguments as JSON text) and
`reasoning_content` (earlier thinking), and on tool turns `tool_call_id` (and `name`).
`developer` becomes `system`; text parts are joined with newlines, as vLLM does. In user
messages, `image_url`, `input_audio` and (vLLM's) `audio_url` and `video_url` parts make the
content the worker contract's list of parts (text / image / audio / video, in order;
gateway/media/parts.py), if the model accepts them; files and audio output parts are a 400
naming the part. An assistant message's
`audio: {"id"}` (an earlier spoken answer of this server) stands for that answer's transcript.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gateway.http.errors import invalid, unknown_field, unsupported
from gateway.media.parts import (
    MediaCollector,
    joined_or_parts,
    openai_audio,
    openai_audio_url,
    openai_image,
    openai_video_url,
)

_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}
_UNSUPPORTED_PARTS = {"file", "audio", "refusal"}
_MEDIA_PARTS = {
    "image_url": openai_image,
    "input_audio": openai_audio,
    "audio_url": openai_audio_url,
    "video_url": openai_video_url,
}
_COMMON_KEYS = {"role", "content", "name"}
_ASSISTANT_KEYS = {"tool_calls", "reasoning_content", "reasoning", "audio"}
# Assistant-message fields accepted only when empty: they carry legacy calls or refusals.
_ASSISTANT_EMPTY_ONLY = {"function_call", "refusal"}
Transcripts = Callable[[str], "str | None"]


def normalize_messages(
    messages: Any, media: MediaCollector | None = None, transcripts: Transcripts | None = None
) -> list[dict[str, Any]]:
    """Worker messages; media parts are checked against and recorded in `media` (default: a
    model that takes text only); `transcripts` finds an earlier spoken answer by its audio id."""
    if not isinstance(messages, list) or not messages:
        raise invalid("messages", "`messages` must be a non-empty array")
    media = media if media is not None else MediaCollector()
    return [
        _message(message, f"messages[{i}]", media, transcripts)
        for i, message in enumerate(messages)
    ]


def _message(
    message: Any, path: str, media: MediaCollector, transcripts: Transcripts | None = None
) -> dict[str, Any]:
    if not isinstance(message, dict):
        raise invalid(path, f"`{path}` must be an object")
    role = message.get("role")
    if role == "function":
        raise unsupported(f"{path}.role", "role 'function' (use 'tool')")
    if not isinstance(role, str) or role not in _ROLES:
        raise invalid(
            f"{path}.role", f"`{path}.role` must be one of {sorted(_ROLES)}, got {role!r}"
        )
    for key, value in message.items():
        if key in _COMMON_KEYS or (role == "tool" and key == "tool_call_id"):
            continue
        if role == "assistant" and key in _ASSISTANT_KEYS:
            continue
        if role == "assistant" and key in _ASSISTANT_EMPTY_ONLY:
            if value is not None:
                raise unsupported(f"{path}.{key}")
            continue
        raise unknown_field(f"{path}.{key}")
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise invalid(f"{path}.name", f"`{path}.name` must be a string")
    content = message.get("content")
    if role == "assistant" and content is None:
        text: str | list[dict[str, str]] = ""  # an assistant turn that only called tools
    elif role == "user":
        text = user_content(content, f"{path}.content", media)
    else:
        text = content_text(content, f"{path}.content")
    out: dict[str, Any] = {"role": _ROLES[role], "content": text}
    if role == "assistant":
        _assistant_extras(message, out, path)
        spoken = _spoken_answer(message.get("audio"), f"{path}.audio", transcripts)
        if spoken is not None:
            if text:
                raise invalid(f"{path}.audio", f"`{path}`: send `content` or `audio`, not both")
            out["content"] = spoken
    elif role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise invalid(f"{path}.tool_call_id", f"`{path}.tool_call_id` must be a string")
        out["tool_call_id"] = call_id
        if name:
            out["name"] = name
    return out


def _assistant_extras(message: dict, out: dict[str, Any], path: str) -> None:
    calls = message.get("tool_calls")
    if calls:
        if not isinstance(calls, list):
            raise invalid(f"{path}.tool_calls", f"`{path}.tool_calls` must be an array")
        out["tool_calls"] = [_tool_call(c, f"{path}.tool_calls[{j}]") for j, c in enumerate(calls)]
    for key in ("reasoning_content", "reasoning"):  # vLLM spells it both ways
        reasoning = message.get(key)
        if reasoning is None:
            continue
        if not isinstance(reasoning, str):
            raise invalid(f"{path}.{key}", f"`{path}.{key}` must be a string")
        if reasoning:
            out["reasoning_content"] = reasoning


def _spoken_answer(audio: Any, path: str, transcripts: Transcripts | None) -> str | None:
    """The transcript of the earlier answer `audio: {"id"}` names; None without `audio`."""
    if audio is None:
        return None
    if not isinstance(audio, dict) or set(audio) != {"id"} or not isinstance(audio["id"], str):
        raise invalid(path, f'`{path}` must be {{"id": <an earlier answer\'s audio id>}}')
    found = transcripts(audio["id"]) if transcripts is not None else None
    if found is None:
        raise invalid(
            f"{path}.id",
            f"`{path}.id` {audio['id']!r} names no spoken answer of this server (they are kept "
            "in memory until they expire)",
        )
    return found


def _tool_call(call: Any, path: str) -> dict[str, Any]:
    if not isinstance(call, dict):
        raise invalid(path, f"`{path}` must be an object")
    for key in call:
        if key not in ("id", "type", "function"):
            raise unknown_field(f"{path}.{key}")
    if call.get("type", "function") != "function":
        raise unsupported(f"{path}.type", f"tool call type {call.get('type')!r}")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise invalid(f"{path}.id", f"`{path}.id` must be a non-empty string")
    function = call.get("function")
    if not isinstance(function, dict):
        raise invalid(f"{path}.function", f"`{path}.function` must be an object")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise invalid(f"{path}.function.name", f"`{path}.function.name` must be a string")
    arguments = function.get("arguments", "")
    if isinstance(arguments, dict):  # lenient: some clients send the parsed object
        arguments = json.dumps(arguments, ensure_ascii=False)
    if not isinstance(arguments, str):
        raise invalid(f"{path}.function.arguments", f"`{path}.function.arguments` must be a string")
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def content_text(content: Any, path: str) -> str:
    """A string, or text content parts joined with newlines."""
    text = _content(content, path, None)
    assert isinstance(text, str)
    return text


def user_content(content: Any, path: str, media: MediaCollector) -> str | list[dict[str, str]]:
    """As `content_text`, but image and audio parts are allowed (a user turn's media)."""
    return _content(content, path, media)


def _content(content: Any, path: str, media: MediaCollector | None) -> str | list[dict[str, str]]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid(path, f"`{path}` must be a string or an array of content parts")
    parts: list[dict[str, str]] = []
    for j, part in enumerate(content):
        part_path = f"{path}[{j}]"
        if not isinstance(part, dict):
            raise invalid(part_path, f"`{part_path}` must be an object")
        kind = part.get("type")
        if not isinstance(kind, str):
            raise invalid(f"{part_path}.type", f"`{part_path}.type` must be a string")
        if kind in _MEDIA_PARTS:
            if media is None:
                raise unsupported(f"{part_path}.type", f"content part type {kind!r} here")
            parts.append(_MEDIA_PARTS[kind](part, part_path, media))
            continue
        if kind in _UNSUPPORTED_PARTS:
            raise unsupported(f"{part_path}.type", f"content part type {kind!r}")
        if kind != "text":
            raise invalid(f"{part_path}.type", f"`{part_path}.type` must be 'text', got {kind!r}")
        for key in part:
            if key not in ("type", "text"):
                raise unknown_field(f"{part_path}.{key}")
        text = part.get("text")
        if not isinstance(text, str):
            raise invalid(f"{part_path}.text", f"`{part_path}.text` must be a string")
        parts.append({"type": "text", "text": text})
    return joined_or_parts(parts)
