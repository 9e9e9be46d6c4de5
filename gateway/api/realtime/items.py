"""Conversation items: what `conversation.item.create` may add, how items are written in
events, and the chat messages a response is generated from.

Items are kept in GA terms (content parts `input_text`, `input_audio`, `output_text`,
`output_audio`) and written in the client's interface (the beta's `text` / `audio` for an
assistant's parts). The chat model hears an audio part as its transcript (the served
speech-recognition model's, or one the client gave), and an assistant's audio as the
transcript of what was spoken (cut at `conversation.item.truncate`).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from gateway.api.realtime.names import Names
from gateway.api.realtime.wire import EventError, new_id

MAX_TEXT = 1 << 20
MAX_ITEMS = 4096  # items of one conversation


@dataclass(slots=True)
class Spoken:
    """An assistant audio part: its transcript, and the phrases spoken with where each began
    in its audio (ms), so that it can be cut to what the user heard."""

    transcript: str = ""
    phrases: list[tuple[int, str]] = field(default_factory=list)
    audio_ms: int = 0

    def truncate(self, end_ms: int) -> None:
        """Keep what was heard: the audio to `end_ms` and the phrases that began before it."""
        self.phrases = [(at, text) for at, text in self.phrases if at < end_ms]
        self.transcript = " ".join(text for _, text in self.phrases)
        self.audio_ms = min(self.audio_ms, end_ms)


@dataclass(slots=True)
class Part:
    type: str  # input_text | input_audio | output_text | output_audio
    text: str = ""  # input_text / output_text; an input_audio's transcript once known
    audio: bytes = b""  # input_audio: PCM16 24 kHz
    transcribed: bool = False  # input_audio: whether `text` is its transcript yet
    spoken: Spoken | None = None  # output_audio


@dataclass(slots=True)
class Item:
    id: str
    type: str  # message | function_call | function_call_output
    role: str = ""
    content: list[Part] = field(default_factory=list)
    status: str = "completed"
    call_id: str = ""
    name: str = ""
    arguments: str = ""
    output: str = ""


# -- reading -------------------------------------------------------------------------------


def _text(value: Any, param: str) -> str:
    if not isinstance(value, str):
        raise EventError(f"`{param}` must be a string", param)
    if len(value) > MAX_TEXT:
        raise EventError(f"`{param}` may be at most {MAX_TEXT} characters", param)
    return value


def decode_audio(value: Any, param: str) -> bytes:
    """Base64 PCM16 (an even number of bytes)."""
    if not isinstance(value, str):
        raise EventError(f"`{param}` must be base64 PCM16", param)
    try:
        pcm = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise EventError(f"`{param}` is not valid base64", param, "invalid_audio") from None
    if len(pcm) % 2:
        raise EventError(f"`{param}` must hold whole 16-bit samples", param, "invalid_audio")
    return pcm


_PARTS = {
    "user": {"input_text", "input_audio"},
    "system": {"input_text"},
    "assistant": {"output_text", "output_audio", "text", "audio"},
}
_GA_PART = {"text": "output_text", "audio": "output_audio"}


def _part(value: Any, role: str, param: str) -> Part:
    if not isinstance(value, dict):
        raise EventError(f"`{param}` must be an object", param)
    kind = value.get("type")
    if kind not in _PARTS[role]:
        allowed = ", ".join(sorted(_PARTS[role]))
        raise EventError(f"`{param}.type` of a {role} message must be one of {allowed}",
                         f"{param}.type")  # fmt: skip
    kind = _GA_PART.get(kind, kind)
    if kind == "input_audio":
        audio = decode_audio(value.get("audio", ""), f"{param}.audio")
        transcript = value.get("transcript")
        if transcript is not None:
            return Part(kind, _text(transcript, f"{param}.transcript"), audio, True)
        return Part(kind, audio=audio)
    if kind == "output_audio":
        transcript = _text(value.get("transcript", ""), f"{param}.transcript")
        return Part(kind, spoken=Spoken(transcript, [(0, transcript)] if transcript else []))
    return Part(kind, _text(value.get("text", ""), f"{param}.text"))


def parse_item(value: Any, param: str = "item") -> Item:
    if not isinstance(value, dict):
        raise EventError(f"`{param}` must be an object", param)
    item_id = value.get("id") or new_id("item")
    if not isinstance(item_id, str) or len(item_id) > 64:
        raise EventError(f"`{param}.id` must be a string of at most 64 characters", f"{param}.id")
    kind = value.get("type", "message")
    if kind == "message":
        role = value.get("role")
        if role not in _PARTS:
            raise EventError(f"`{param}.role` must be user, assistant or system", f"{param}.role")
        content = value.get("content")
        if not isinstance(content, list) or not content:
            raise EventError(f"`{param}.content` must be a non-empty array", f"{param}.content")
        parts = [_part(p, role, f"{param}.content[{i}]") for i, p in enumerate(content)]
        return Item(item_id, kind, role, parts)
    if kind == "function_call":
        call_id = _text(value.get("call_id", ""), f"{param}.call_id") or new_id("call")
        return Item(item_id, kind, call_id=call_id, name=_text(value.get("name", ""),
                    f"{param}.name"), arguments=_text(value.get("arguments", ""),
                    f"{param}.arguments"))  # fmt: skip
    if kind == "function_call_output":
        call_id = _text(value.get("call_id"), f"{param}.call_id")
        return Item(item_id, kind, call_id=call_id, output=_text(value.get("output"),
                    f"{param}.output"))  # fmt: skip
    raise EventError(
        f"`{param}.type` must be message, function_call or function_call_output", f"{param}.type"
    )


# -- writing -------------------------------------------------------------------------------


def _part_object(part: Part, names: Names) -> dict[str, Any]:
    if part.type == "input_audio":
        return {"type": "input_audio", "transcript": part.text if part.transcribed else None}
    if part.type == "output_audio":
        assert part.spoken is not None
        return {"type": names.audio_part, "transcript": part.spoken.transcript}
    if part.type == "output_text":
        return {"type": names.text_part, "text": part.text}
    return {"type": part.type, "text": part.text}


def item_object(item: Item, names: Names) -> dict[str, Any]:
    out: dict[str, Any] = {"id": item.id, "object": "realtime.item", "type": item.type,
                           "status": item.status}  # fmt: skip
    if item.type == "message":
        out["role"] = item.role
        out["content"] = [_part_object(part, names) for part in item.content]
    elif item.type == "function_call":
        out.update(call_id=item.call_id, name=item.name, arguments=item.arguments)
    else:
        out.update(call_id=item.call_id, output=item.output)
    return out


# -- chat messages -------------------------------------------------------------------------


def _message_text(item: Item) -> str:
    texts = []
    for part in item.content:
        if part.type == "output_audio":
            assert part.spoken is not None
            texts.append(part.spoken.transcript)
        else:
            texts.append(part.text)
    return " ".join(t for t in texts if t)


def chat_messages(instructions: str, items: list[Item]) -> list[dict[str, Any]]:
    """The conversation as chat-completions messages (function calls of one turn together)."""
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    for item in items:
        if item.type == "message":
            messages.append({"role": item.role, "content": _message_text(item)})
        elif item.type == "function_call":
            call = {"id": item.call_id, "type": "function",
                    "function": {"name": item.name, "arguments": item.arguments or "{}"}}  # fmt: skip
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        else:
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": item.output})
    return messages
