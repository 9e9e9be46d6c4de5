"""The warm prompts file (`--warm-prompts FILE`): prefixes the worker prefills into its prefix
cache at start (worker/cache/warm_prompts.py).

The file is JSON Lines; each non-blank line is one of
- `{"messages": [...], "chat_template_kwargs": {...}}` (the second key optional): a chat, as
  the inputs of a chat Submit (e.g. a long system prompt shared by later requests);
- `{"prompt": "..."}` or `{"prompt": [token ids]}`, or a bare JSON string: a completion prompt.
A bad line is an error naming the file, the line and what is wrong with it.

The gateway validates the file before it starts the worker; the worker parses it again to use
it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.inputs import ChatInputs, CompleteInputs, SamplingParams

_CHAT_FIELDS = {"messages", "chat_template_kwargs"}


class WarmPromptsError(ValueError):
    """The warm prompts file cannot be used; the message names the file and line."""


# A warm prompt is prefilled, never sampled: its inputs carry this placeholder sampling.
PREFILL_ONLY = SamplingParams(max_tokens=1)


@dataclass(frozen=True)
class WarmPrompt:
    """One line of the file (`line` is 1-based) as the inputs of a Submit."""

    line: int
    inputs: ChatInputs | CompleteInputs


def load_warm_prompts(path: str | Path) -> list[WarmPrompt]:
    """Parses the file at `path` (raises WarmPromptsError, also when it cannot be read)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WarmPromptsError(f"cannot read warm prompts file {path}: {exc}") from exc
    return parse_warm_prompts(text, source=str(path))


def parse_warm_prompts(text: str, source: str = "warm prompts") -> list[WarmPrompt]:
    """Every non-blank line as a WarmPrompt; the first bad line raises WarmPromptsError."""
    prompts = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            prompts.append(_parse_line(line, number, f"{source} line {number}"))
    return prompts


def _parse_line(line: str, number: int, where: str) -> WarmPrompt:
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        raise WarmPromptsError(f"{where}: not valid JSON ({exc.msg})") from exc
    if isinstance(item, str):
        item = {"prompt": item}
    if not isinstance(item, dict):
        raise WarmPromptsError(
            f"{where}: expected an object or a string, got {type(item).__name__}"
        )
    if ("messages" in item) == ("prompt" in item):
        raise WarmPromptsError(f"{where}: needs exactly one of 'messages' and 'prompt'")
    allowed = _CHAT_FIELDS if "messages" in item else {"prompt"}
    unknown = sorted(set(item) - allowed)
    if unknown:
        raise WarmPromptsError(f"{where}: unknown field {unknown[0]!r}")
    if "prompt" in item:
        _check_prompt(item["prompt"], where)
        return WarmPrompt(number, CompleteInputs(item["prompt"], PREFILL_ONLY))
    _check_messages(item["messages"], where)
    kwargs = item.get("chat_template_kwargs", {})
    if not isinstance(kwargs, dict):
        raise WarmPromptsError(f"{where}: 'chat_template_kwargs' must be an object")
    inputs = ChatInputs(item["messages"], PREFILL_ONLY, chat_template_kwargs=kwargs)
    return WarmPrompt(number, inputs)


def _check_prompt(prompt: Any, where: str) -> None:
    if isinstance(prompt, str) and prompt:
        return
    if isinstance(prompt, list) and prompt:
        if all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in prompt):
            return
    raise WarmPromptsError(f"{where}: 'prompt' must be a non-empty string or list of token ids")


def _check_messages(messages: Any, where: str) -> None:
    if not isinstance(messages, list) or not messages:
        raise WarmPromptsError(f"{where}: 'messages' must be a non-empty list")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise WarmPromptsError(f"{where}: messages[{i}] must be an object")
        role = message.get("role")
        if not isinstance(role, str) or not role:
            raise WarmPromptsError(f"{where}: messages[{i}].role must be a non-empty string")
        if "content" not in message:
            raise WarmPromptsError(f"{where}: messages[{i}].content is missing")
