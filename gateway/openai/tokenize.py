"""Parse vLLM's `/tokenize` and `/detokenize` bodies into the worker's tokenizer calls.

vLLM's shapes (vllm/entrypoints/serve/tokenize/protocol.py): a prompt body `{model, prompt,
add_special_tokens (default true), return_token_strs (default false)}` or a chat body `{model,
messages, add_generation_prompt (default true), continue_final_message (default false),
add_special_tokens (default false), chat_template, chat_template_kwargs, tools,
mm_processor_kwargs, media_io_kwargs, return_token_strs}`, told apart by `prompt` /
`messages`; and `{model, tokens}` to detokenize. `model` may be left out, as in vLLM: the
served chat model is meant.

Field policy as in requests.py: honoured, or accepted with no local meaning, or a 400 naming
the field; unknown fields (and a chat field on a prompt body) are 400s naming them. Honoured:
all of the above but `chat_template`, `mm_processor_kwargs` and `media_io_kwargs`. A template
from the request is a 400 unless null (vLLM too refuses one without
`--trust-request-chat-template`); the media options are accepted with no effect, since image
and audio parts are refused (their tokens depend on the model's processor, as count_tokens').
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.http.errors import invalid, unknown_field, unsupported
from gateway.media.parts import MediaCollector
from gateway.openai import fields as f
from gateway.openai.messages import normalize_messages
from gateway.openai.tools import parse_tool_fields
from protocol.inputs import ChatInputs, SamplingParams
from protocol.messages import TokenizeArgs

_PROMPT_FIELDS = frozenset({"model", "prompt", "add_special_tokens", "return_token_strs"})
_CHAT_ONLY = frozenset(
    {
        "messages",
        "add_generation_prompt",
        "continue_final_message",
        "chat_template",
        "chat_template_kwargs",
        "tools",
        "mm_processor_kwargs",
        "media_io_kwargs",
    }
)
_CHAT_FIELDS = (_PROMPT_FIELDS - {"prompt"}) | _CHAT_ONLY
_DETOKENIZE_FIELDS = frozenset({"model", "tokens"})
_NO_MEDIA = "image and audio parts in /tokenize (their tokens depend on the model's processor)"


@dataclass(frozen=True)
class TokenizeRequest:
    model: str | None  # None: the served chat model
    args: TokenizeArgs


@dataclass(frozen=True)
class DetokenizeRequest:
    model: str | None
    tokens: list[int]


def parse_tokenize(body: dict[str, Any]) -> TokenizeRequest:
    """A `/tokenize` body -> the tokenize call's arguments, or a 400 naming a field."""
    if "messages" in body and "prompt" in body:
        raise invalid("prompt", "Send either `prompt` or `messages`, not both")
    if "messages" in body:
        return TokenizeRequest(_checked_model(body, _CHAT_FIELDS), _chat_args(body))
    for name in body:
        if name in _CHAT_ONLY:
            raise invalid(name, f"`{name}` applies to a chat (a body with `messages`) only")
    model = _checked_model(body, _PROMPT_FIELDS)
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        if prompt is None:
            raise invalid("prompt", "`prompt` (a string) or `messages` is required")
        raise invalid("prompt", "`prompt` must be a string")
    args = TokenizeArgs(
        prompt=prompt,
        add_special_tokens=_flag(body, "add_special_tokens", True),
        return_token_strs=_flag(body, "return_token_strs", False),
    )
    return TokenizeRequest(model, args)


def parse_detokenize(body: dict[str, Any]) -> DetokenizeRequest:
    """A `/detokenize` body -> (model, token ids), or a 400 naming a field."""
    model = _checked_model(body, _DETOKENIZE_FIELDS)
    tokens = body.get("tokens")
    if not isinstance(tokens, list):
        raise invalid("tokens", "`tokens` must be an array of token ids (integers >= 0)")
    ids = []
    for i, token in enumerate(tokens):
        if isinstance(token, float) and token.is_integer():
            token = int(token)  # 3.0 is an integer in JSON's eyes
        if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token <= f.INT64_MAX:
            raise invalid(
                "tokens", f"`tokens[{i}]` must be a token id (an integer >= 0), got {token!r}"
            )
        ids.append(token)
    return DetokenizeRequest(model, ids)


def _checked_model(body: dict[str, Any], allowed: frozenset[str]) -> str | None:
    """`model` (None when left out), once every field is known to be one of `allowed`."""
    for name in body:
        if name not in allowed:
            raise unknown_field(name)
    return f.string(body, "model")


def _flag(body: dict[str, Any], name: str, default: bool) -> bool:
    value = f.boolean(body, name)
    return default if value is None else value


def _chat_args(body: dict[str, Any]) -> TokenizeArgs:
    messages = normalize_messages(body.get("messages"), MediaCollector(refusal=_NO_MEDIA))
    if body.get("chat_template") is not None:
        f.string(body, "chat_template")
        raise unsupported("chat_template", "a chat template in the request")
    for name in ("mm_processor_kwargs", "media_io_kwargs"):
        f.obj(body, name)  # no local meaning: no media part gets this far
    continue_final = _flag(body, "continue_final_message", False)
    generation_prompt = f.boolean(body, "add_generation_prompt")
    if generation_prompt is None:
        generation_prompt = not continue_final  # an open final message takes no header after it
    elif continue_final and generation_prompt:
        raise invalid(
            "continue_final_message",
            "`continue_final_message` and `add_generation_prompt` cannot both be true",
        )
    chat = ChatInputs(
        messages=messages,
        sampling=SamplingParams(max_tokens=1),  # nothing is sampled: the prompt is measured
        chat_template_kwargs=dict(f.obj(body, "chat_template_kwargs") or {}),
        **parse_tool_fields(body),
    )
    return TokenizeArgs(
        chat=chat,
        add_special_tokens=_flag(body, "add_special_tokens", False),
        add_generation_prompt=generation_prompt,
        continue_final_message=continue_final,
        return_token_strs=_flag(body, "return_token_strs", False),
    )
