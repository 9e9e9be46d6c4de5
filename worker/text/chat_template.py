"""`--chat-template FILE`: a Jinja chat template used instead of the checkpoint's.

Set on the tokenizer right after load, before anything renders a prompt (warm prompts, the
detection of reasoning and tool-call formats, which read the template's text), so the whole
worker sees one template. mlx-lm's own Python renderers for some families are switched off
with it: the file is what renders. A template that does not compile fails the load, naming
the file, instead of failing every request later.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def replace_chat_template(tokenizer: Any, path: str) -> None:
    """Make `tokenizer` (mlx-lm's TokenizerWrapper) render chats with the template in `path`."""
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    text = Path(path).read_text(encoding="utf-8")
    try:  # as transformers compiles it: sandboxed, with break/continue
        ImmutableSandboxedEnvironment(extensions=["jinja2.ext.loopcontrols"]).parse(text)
    except TemplateError as exc:
        raise ValueError(f"--chat-template {path}: {exc}") from exc
    hf = getattr(tokenizer, "_tokenizer", tokenizer)
    hf.chat_template = text
    if hasattr(tokenizer, "_chat_template"):
        tokenizer._chat_template = None  # mlx-lm's Python renderer for the family, if any
    tokenizer.has_chat_template = True
