"""Anthropic context management (`context_management.edits`, beta `context-management-2025-06-27`):
edits applied to a request's messages before its prompt is built, and reported back.

- `clear_thinking_20251015`: the thinking blocks of assistant turns older than the `keep` most
  recent ones are removed (`keep`: `{"type": "thinking_turns", "value": N}`, default 1 turn;
  `"all"` or `{"type": "all"}` keeps every one, so nothing is cleared).
- `clear_tool_uses_20250919`: once the prompt passes `trigger` (`input_tokens`, default
  100,000, or a number of `tool_uses`), the results of the tool uses older than the `keep` most
  recent (`tool_uses`, default 3) are replaced by a placeholder, but never those of
  `exclude_tools`; `clear_tool_inputs` (true, or tool names) also empties those calls' inputs;
  with `clear_at_least`, the edit is dropped when it would clear fewer input tokens.
- `compact_20260112` summarizes older context with the model on the server: not supported.

Edits apply in order, each to what the previous left. An edit that clears nothing is not
reported. Token counts (the trigger, `cleared_input_tokens`) are the worker's own count of the
whole request's prompt, taken only when an edit needs one.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gateway.generation.structured import check_keys
from gateway.http.errors import invalid, unsupported

CLEAR_THINKING = "clear_thinking_20251015"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
COMPACT = "compact_20260112"
CLEARED_RESULT = "[tool result cleared to save context]"

Messages = list[dict[str, Any]]
CountTokens = Callable[[Messages], Awaitable[int]]  # the prompt's length with these messages


@dataclass(frozen=True, slots=True)
class ClearThinking:
    keep: int | None  # assistant turns whose thinking stays; None: all


@dataclass(frozen=True, slots=True)
class ClearToolUses:
    trigger_kind: str  # "input_tokens" or "tool_uses"
    trigger: int
    keep: int
    exclude: frozenset[str]
    clear_inputs: bool | frozenset[str]
    clear_at_least: int | None


Edit = ClearThinking | ClearToolUses


def parse_edits(value: Any) -> list[Edit]:
    """`context_management` -> its edits, or a 400 naming the field at fault."""
    path = "context_management"
    if value is None:
        return []
    if not isinstance(value, dict):
        raise invalid(path, f"`{path}` must be an object")
    check_keys(value, {"edits"}, path)
    edits = value.get("edits", [])
    if not isinstance(edits, list):
        raise invalid(f"{path}.edits", f"`{path}.edits` must be an array")
    return [_edit(edit, f"{path}.edits[{i}]") for i, edit in enumerate(edits)]


def _edit(edit: Any, path: str) -> Edit:
    if not isinstance(edit, dict):
        raise invalid(path, f"`{path}` must be an object")
    kind = edit.get("type")
    if kind == CLEAR_THINKING:
        check_keys(edit, {"type", "keep"}, path)
        return ClearThinking(_thinking_keep(edit.get("keep", _DEFAULT_KEEP), f"{path}.keep"))
    if kind == CLEAR_TOOL_USES:
        check_keys(
            edit,
            {"type", "trigger", "keep", "exclude_tools", "clear_tool_inputs", "clear_at_least"},
            path,
        )
        kind_, trigger = _counted(
            edit.get("trigger"), ("input_tokens", "tool_uses"), f"{path}.trigger", 100_000
        )
        _, keep = _counted(edit.get("keep"), ("tool_uses",), f"{path}.keep", 3)
        least = edit.get("clear_at_least")
        least_value = (
            None
            if least is None
            else _counted(least, ("input_tokens",), f"{path}.clear_at_least", 0)[1]
        )
        return ClearToolUses(
            kind_,
            trigger,
            keep,
            frozenset(_names(edit.get("exclude_tools"), f"{path}.exclude_tools")),
            _clear_inputs(edit.get("clear_tool_inputs"), f"{path}.clear_tool_inputs"),
            least_value,
        )
    if kind == COMPACT:
        raise unsupported(f"{path}.type", "server-side compaction, which summarizes on the server")
    raise invalid(
        f"{path}.type", f"`{path}.type` must be '{CLEAR_THINKING}' or '{CLEAR_TOOL_USES}'"
    )


_DEFAULT_KEEP = {"type": "thinking_turns", "value": 1}


def _thinking_keep(keep: Any, path: str) -> int | None:
    if keep == "all" or (isinstance(keep, dict) and keep.get("type") == "all" and len(keep) == 1):
        return None
    return _counted(keep, ("thinking_turns",), path, 1)[1]


def _counted(value: Any, kinds: tuple[str, ...], path: str, default: int) -> tuple[str, int]:
    """A `{"type": KIND, "value": N}` object (N >= 0) -> (KIND, N); absent: the default."""
    if value is None:
        return kinds[0], default
    if not isinstance(value, dict) or value.get("type") not in kinds:
        names = " or ".join(f"'{k}'" for k in kinds)
        raise invalid(path, f"`{path}` must be {{'type': {names}, 'value': N}}")
    check_keys(value, {"type", "value"}, path)
    number = value.get("value")
    if isinstance(number, bool) or not isinstance(number, int) or number < 0:
        raise invalid(f"{path}.value", f"`{path}.value` must be a non-negative integer")
    return value["type"], number


def _names(value: Any, path: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid(path, f"`{path}` must be an array of tool names")
    return value


def _clear_inputs(value: Any, path: str) -> bool | frozenset[str]:
    if value is None or isinstance(value, bool):
        return bool(value)
    return frozenset(_names(value, path))


# -- applying ------------------------------------------------------------------------------


async def apply_edits(
    messages: Messages, edits: list[Edit], count: CountTokens
) -> tuple[Messages, list[dict[str, Any]]]:
    """The messages after the edits, and the applied edits as the API reports them."""
    counted: dict[int, int] = {}  # id of a messages list -> its prompt length

    async def measure(these: Messages) -> int:
        if id(these) not in counted:
            counted[id(these)] = await count(these)
        return counted[id(these)]

    applied = []
    for edit in edits:
        if isinstance(edit, ClearThinking):
            edited, cleared = clear_thinking(messages, edit.keep)
            report = {"type": CLEAR_THINKING, "cleared_thinking_turns": cleared}
        else:
            if not await _triggered(messages, edit, measure):
                continue
            edited, cleared = clear_tool_uses(messages, edit)
            report = {"type": CLEAR_TOOL_USES, "cleared_tool_uses": cleared}
        if not cleared:
            continue
        saved = await measure(messages) - await measure(edited)
        if isinstance(edit, ClearToolUses) and saved < (edit.clear_at_least or 0):
            continue
        messages = edited
        applied.append({**report, "cleared_input_tokens": max(saved, 0)})
    return messages, applied


async def _triggered(messages: Messages, edit: ClearToolUses, count: CountTokens) -> bool:
    if edit.trigger_kind == "tool_uses":
        return len(_tool_uses(messages)) > edit.trigger
    return await count(messages) > edit.trigger


def clear_thinking(messages: Messages, keep: int | None) -> tuple[Messages, int]:
    """Drop the thinking blocks of all but the `keep` latest assistant turns with content."""
    if keep is None:
        return messages, 0
    turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    older = turns[: max(len(turns) - keep, 0)]
    edited, cleared = list(messages), 0
    for i in older:
        content = messages[i].get("content")
        if not isinstance(content, list):
            continue
        kept = [b for b in content if not _is_thinking(b)]
        if len(kept) == len(content):
            continue
        edited[i] = {**messages[i], "content": kept or [{"type": "text", "text": ""}]}
        cleared += 1
    return edited, cleared


def _is_thinking(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in ("thinking", "redacted_thinking")


def _tool_uses(messages: Messages) -> list[tuple[int, int, dict[str, Any]]]:
    """(message index, block index, block) of every tool_use block, in order."""
    return [
        (i, j, block)
        for i, message in enumerate(messages)
        if message.get("role") == "assistant" and isinstance(message.get("content"), list)
        for j, block in enumerate(message["content"])
        if isinstance(block, dict) and block.get("type") == "tool_use"
    ]


def clear_tool_uses(messages: Messages, edit: ClearToolUses) -> tuple[Messages, int]:
    """Replace the results (and, if asked, the inputs) of all but the `keep` latest tool uses."""
    uses = _tool_uses(messages)
    older = uses[: max(len(uses) - edit.keep, 0)]
    targets = {b.get("id"): (i, j, b) for i, j, b in older if b.get("name") not in edit.exclude}
    if not targets:
        return messages, 0
    edited = copy.deepcopy(messages)
    cleared: set[str] = set()
    for message in edited:
        if message.get("role") != "user" or not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_result"
                and block.get("tool_use_id") in targets
                and block.get("content") != CLEARED_RESULT
            ):
                block["content"] = CLEARED_RESULT
                cleared.add(block["tool_use_id"])
    for use_id, (i, j, block) in targets.items():
        inputs = edit.clear_inputs
        if inputs is True or (isinstance(inputs, frozenset) and block.get("name") in inputs):
            if block.get("input"):
                edited[i]["content"][j]["input"] = {}
                cleared.add(use_id)
    return edited, len(cleared)
