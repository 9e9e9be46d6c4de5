"""Anthropic `system`, `messages` and `tools` -> the worker's chat messages and tools.

- `system` (a string or text blocks) and `role: "system"` messages -> system messages;
  Claude Code's attribution line at the start of `system` is dropped (attribution.py). A
  `role: "system"` message (beta `per-turn-control`) may carry `output_config` (its `effort`
  is accepted, as the top-level one is) and `clear_at`: `"next_user_message"` shows it only
  to the user turn it follows, so it is left out once a later user message exists; one with
  no content (only `output_config`) adds nothing to the prompt;
- user turns: consecutive text blocks -> one user message; each `tool_result` block -> a
  `tool` message (its text; `is_error` results are prefixed "Error: ");
- assistant turns -> one assistant message: text blocks joined, `thinking` blocks ->
  `reasoning_content`, `tool_use` blocks -> `tool_calls` (arguments = the JSON text of
  `input`); `redacted_thinking` is dropped (it cannot be read back);
- `image` blocks in user turns (base64 or url sources) become the worker contract's image
  parts (the user message's content is then a list of parts; gateway/media/parts.py) when the
  model accepts images; documents, search results, server-tool blocks and images anywhere
  else are a 400 naming the block. `cache_control` and `citations` are accepted everywhere: the prefix
  cache is automatic, citations have no local meaning.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.api.anthropic_messages.attribution import without_attribution
from gateway.generation.tools import function_tool, marked_deferred
from gateway.http.errors import invalid, unknown_field, unsupported
from gateway.media.parts import MediaCollector, anthropic_image, joined_or_parts

_TEXT_KEYS = {"type", "text", "cache_control", "citations"}
_BLOCK_KEYS = {
    "text": _TEXT_KEYS,
    "thinking": {"type", "thinking", "signature", "cache_control"},
    "redacted_thinking": {"type", "data", "cache_control"},
    "tool_use": {"type", "id", "name", "input", "cache_control", "caller", "toolset_name"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control", "toolset_name"},
}
_TOOL_KEYS = {
    "type",
    "name",
    "description",
    "input_schema",
    "cache_control",
    "strict",
    "defer_loading",
    "eager_input_streaming",
    "input_examples",
    "allowed_callers",
}


def _require_str(block: dict, key: str, path: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise invalid(f"{path}.{key}", f"`{path}.{key}` must be a string")
    return value


def _block(block: Any, path: str, allowed: tuple[str, ...]) -> tuple[str, dict]:
    if not isinstance(block, dict):
        raise invalid(path, f"`{path}` must be an object")
    kind = block.get("type")
    if kind not in allowed:
        if isinstance(kind, str):
            raise unsupported(f"{path}.type", f"content block type {kind!r} here")
        raise invalid(f"{path}.type", f"`{path}.type` must be a string")
    for key in block:
        if key not in _BLOCK_KEYS[kind]:
            raise unknown_field(f"{path}.{key}")
    return kind, block


def text_of(content: Any, path: str) -> str:
    """A string, or text blocks joined with newlines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid(path, f"`{path}` must be a string or an array of text blocks")
    texts = []
    for i, item in enumerate(content):
        _, block = _block(item, f"{path}[{i}]", ("text",))
        texts.append(_require_str(block, "text", f"{path}[{i}]"))
    return "\n".join(texts)


def system_messages(system: Any) -> list[dict[str, Any]]:
    if system is None:
        return []
    text = without_attribution(text_of(system, "system"))
    return [{"role": "system", "content": text}] if text else []


def convert_messages(messages: Any, media: MediaCollector | None = None) -> list[dict[str, Any]]:
    """Worker messages; image blocks are checked against and recorded in `media` (default: a
    model that takes text only)."""
    media = media if media is not None else MediaCollector()
    if not isinstance(messages, list) or not messages:
        raise invalid("messages", "`messages` must be a non-empty array")
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        path = f"messages[{i}]"
        if not isinstance(message, dict):
            raise invalid(path, f"`{path}` must be an object")
        role, content = message.get("role"), message.get("content")
        allowed = _MESSAGE_KEYS.get(role, ("role", "content")) if isinstance(role, str) else ()
        for key in message:
            if allowed and key not in allowed:
                raise unknown_field(f"{path}.{key}")
        if role == "user":
            out.extend(_user(content, f"{path}.content", media))
        elif role == "assistant":
            out.append(_assistant(content, f"{path}.content"))
        elif role == "system":
            later_user = any(
                m.get("role") == "user" for m in messages[i + 1 :] if isinstance(m, dict)
            )
            out.extend(_system_turn(message, path, later_user))
        else:
            raise invalid(f"{path}.role", f"`{path}.role` must be 'user', 'assistant' or 'system'")
    if messages[-1].get("role") == "assistant":
        raise unsupported(f"messages[{len(messages) - 1}]", "a final assistant message (prefill)")
    return out


_MESSAGE_KEYS = {
    "user": ("role", "content"),
    "assistant": ("role", "content"),
    "system": ("role", "content", "clear_at", "output_config"),
}


def _system_turn(message: dict, path: str, later_user: bool) -> list[dict[str, Any]]:
    """A `role: "system"` message: [] when it has no text or `clear_at` retired it."""
    config = message.get("output_config")
    if config is not None:
        if not isinstance(config, dict):
            raise invalid(f"{path}.output_config", f"`{path}.output_config` must be an object")
        for key in config:
            if key != "effort":
                raise unknown_field(f"{path}.output_config.{key}")
        effort = config.get("effort")
        if effort is not None and not isinstance(effort, str):
            raise invalid(f"{path}.output_config.effort", "`output_config.effort` must be a string")
    clear_at = message.get("clear_at")
    if clear_at not in (None, "never", "next_user_message"):
        raise invalid(f"{path}.clear_at", "`clear_at` must be 'never' or 'next_user_message'")
    content = message.get("content")
    if content is None:
        if config is None:
            raise invalid(path, f"`{path}` has neither content nor output_config")
        return []
    text = text_of(content, f"{path}.content")
    if not text or (clear_at == "next_user_message" and later_user):
        return []
    return [{"role": "system", "content": text}]


def _user(content: Any, path: str, media: MediaCollector) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    if not isinstance(content, list):
        raise invalid(path, f"`{path}` must be a string or an array of content blocks")
    out: list[dict[str, Any]] = []
    parts: list[dict[str, str]] = []  # text and image parts of the user message being built
    for i, item in enumerate(content):
        block_path = f"{path}[{i}]"
        if isinstance(item, dict) and item.get("type") == "image":
            parts.append(anthropic_image(item, block_path, media))
            continue
        kind, block = _block(item, block_path, ("text", "tool_result"))
        if kind == "text":
            parts.append({"type": "text", "text": _require_str(block, "text", block_path)})
            continue
        if parts:
            out.append({"role": "user", "content": joined_or_parts(parts)})
            parts = []
        out.append(_tool_result(block, block_path))
    if parts or not out:
        out.append({"role": "user", "content": joined_or_parts(parts)})
    return out


def _tool_result(block: dict, path: str) -> dict[str, Any]:
    call_id = _require_str(block, "tool_use_id", path)
    content = block.get("content")
    text = "" if content is None else text_of(content, f"{path}.content")
    is_error = block.get("is_error")
    if is_error is not None and not isinstance(is_error, bool):
        raise invalid(f"{path}.is_error", f"`{path}.is_error` must be a boolean")
    if is_error:
        text = f"Error: {text}"
    return {"role": "tool", "content": text, "tool_call_id": call_id}


def _assistant(content: Any, path: str) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    if not isinstance(content, list):
        raise invalid(path, f"`{path}` must be a string or an array of content blocks")
    texts, thoughts, calls = [], [], []
    allowed = ("text", "thinking", "redacted_thinking", "tool_use")
    for i, item in enumerate(content):
        block_path = f"{path}[{i}]"
        kind, block = _block(item, block_path, allowed)
        if kind == "text":
            texts.append(_require_str(block, "text", block_path))
        elif kind == "thinking":
            thoughts.append(_require_str(block, "thinking", block_path))
        elif kind == "tool_use":
            calls.append(_tool_use(block, block_path))
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if calls:
        message["tool_calls"] = calls
    if any(thoughts):
        message["reasoning_content"] = "\n".join(t for t in thoughts if t)
    return message


def _tool_use(block: dict, path: str) -> dict[str, Any]:
    call_id = _require_str(block, "id", path)
    name = _require_str(block, "name", path)
    arguments = block.get("input")
    if not isinstance(arguments, dict):
        raise invalid(f"{path}.input", f"`{path}.input` must be an object")
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def convert_tools(tools: Any) -> list[dict[str, Any]]:
    """Client tools (`{name, description, input_schema}`) -> the worker's function tools, a
    deferred one (`defer_loading: true`) marked so (`marked_deferred`)."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise invalid("tools", "`tools` must be an array")
    out = []
    for i, tool in enumerate(tools):
        path = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise invalid(path, f"`{path}` must be an object")
        kind = tool.get("type")
        if kind not in (None, "custom"):
            raise unsupported(f"{path}.type", f"server tool {kind!r} (only client tools)")
        for key in tool:
            if key not in _TOOL_KEYS:
                raise unknown_field(f"{path}.{key}")
        if not isinstance(tool.get("input_schema"), dict):
            raise invalid(f"{path}.input_schema", f"`{path}.input_schema` must be an object")
        checked = function_tool(
            tool.get("name"), tool.get("description"), tool["input_schema"], path, "input_schema"
        )
        out.append(marked_deferred(checked, tool, path))
    return out
