"""Tools for a model whose chat template cannot render them: a system block in the Hermes format.

Many chat templates never mention `tools` (SmolLM2's, Llama 2's, most base fine-tunes'): given
tools, they render the prompt as if there were none, so a request with tools would be accepted
and the model would never see them. For such a template the tools are written into the
conversation instead, as llama.cpp's generic tool handling does, in the Hermes format most open
models were trained on:

- a system block listing the functions (JSON) inside `<tools></tools>` and asking for calls
  as `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (added to the first system
  message, or as a new first one);
- an earlier assistant turn's `tool_calls` as those blocks after its text, and a `tool`
  message as a user turn holding `<tool_response>...</tool_response>` (such templates know no
  tool role either);
and the Hermes parser reads the answer (worker/text/features.py). Whether a template renders
tools is read from its Jinja source once per tokenizer: it does when it uses the `tools`
variable.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

_lock = threading.Lock()
_renders: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()

_INSTRUCTIONS = (
    "# Tools\n\n"
    "You may call one or more of these functions to help answer the user. Their signatures, "
    "as JSON, are inside <tools></tools>:\n"
    "<tools>\n{tools}\n</tools>\n\n"
    "To call a function, answer with a JSON object giving its name and arguments inside "
    "<tool_call></tool_call> tags, one block per call:\n"
    '<tool_call>\n{{"name": <function name>, "arguments": <arguments as a JSON object>}}\n'
    "</tool_call>"
)


def template_renders_tools(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template uses the `tools` variable (cached)."""
    with _lock:
        known = _renders.get(tokenizer)
    if known is None:
        known = _uses_tools(_template_sources(tokenizer))
        with _lock:
            _renders[tokenizer] = known
    return known


def _template_sources(tokenizer: Any) -> list[str]:
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, Mapping):  # several named templates ("default", "tool_use")
        return [str(t) for t in template.values()]
    if isinstance(template, list):
        return [str(t.get("template", "")) for t in template if isinstance(t, Mapping)]
    return [template] if isinstance(template, str) else []


def _uses_tools(sources: list[str]) -> bool:
    from jinja2 import Environment, TemplateSyntaxError, meta

    environment = Environment()
    for source in sources:
        try:
            if "tools" in meta.find_undeclared_variables(environment.parse(source)):
                return True
        except TemplateSyntaxError:  # rendering reports it; judge by the text meanwhile
            if "tools" in source:
                return True
    return False


def with_tools_in_messages(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """`messages` with `tools` described in a system block and the tool turns in Hermes text."""
    listed = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    block = _INSTRUCTIONS.format(tools=listed)
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            text = f"<tool_response>\n{message.get('content', '')}\n</tool_response>"
            out.append({"role": "user", "content": text})
        elif role == "assistant" and message.get("tool_calls"):
            calls = [_call_block(call) for call in message["tool_calls"]]
            text = "\n".join(filter(None, [message.get("content") or "", *calls]))
            plain = {k: v for k, v in message.items() if k != "tool_calls"}
            out.append({**plain, "content": text})
        else:
            out.append(dict(message))
    if out and out[0].get("role") in ("system", "developer"):
        first = out[0]
        out[0] = {**first, "content": f"{first.get('content', '')}\n\n{block}".lstrip()}
    else:
        out.insert(0, {"role": "system", "content": block})
    return out


def _call_block(call: Mapping[str, Any]) -> str:
    function = call.get("function") or {}
    arguments = function.get("arguments", "{}")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            pass  # shown as the text it was
    body = json.dumps({"name": function.get("name"), "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"
