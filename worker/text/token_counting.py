"""count_tokens: the prompt length a chat request would have, without generating anything.

The gateway's `count_tokens` control call (Anthropic `/v1/messages/count_tokens`) carries the
same chat inputs a Submit would; the count is the length of the prompt the same builder makes
(template, tools and all), so it always equals the request's `prompt_tokens`.

It runs on the worker's receiver thread, not the MLX thread: it touches only the tokenizer
(Jinja rendering and a Rust `encode`, which may run while the MLX thread decodes: neither
changes the tokenizer's state).
"""

from __future__ import annotations

from typing import Any

from protocol.inputs import ChatInputs
from worker.text.prompts import chat_prompt_tokens


def count_chat_tokens(tokenizer: Any, inputs: ChatInputs) -> int:
    """The prompt length for chat `inputs` (RequestError when they are malformed)."""
    return len(chat_prompt_tokens(tokenizer, inputs))
