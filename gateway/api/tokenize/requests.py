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

from gateway.generation.openai_messages import normalize_messages
from gateway.generation.openai_tools import parse_tool_fields
from gateway.http.errors import invalid, unsupported
from gateway.media.parts import MediaCollector
from gateway.schema import field as s
from gateway.schema import readers as f
from gateway.schema.openai_chat import FUNCTION_TOOL, MESSAGE
from gateway.schema.request import RequestSchema
from protocol.inputs import ChatInputs, SamplingParams
from protocol.messages import TokenizeArgs

_MODEL = s.string("The served chat model's id or an alias (default: the served one).", minLength=1)
_STRINGS = s.boolean("Also return each token's string (default false).")
PROMPT = RequestSchema(
    {
        "model": _MODEL,
        "prompt": s.string("The text to tokenize, as a completion request would."),
        "add_special_tokens": s.boolean("The tokenizer's special tokens (default true)."),
        "return_token_strs": _STRINGS,
    },
    # `prompt` is required too; parse_tokenize says so, naming the other choice (`messages`).
)
CHAT = RequestSchema(
    {
        "model": _MODEL,
        "messages": s.structure(
            {"type": "array", "items": MESSAGE, "minItems": 1}, "A chat, as chat requests send it."
        ),
        "add_generation_prompt": s.boolean("Default: not continue_final_message."),
        "continue_final_message": s.boolean("Leave the last message open (default false)."),
        "add_special_tokens": s.boolean("Special tokens on top of the template's (default false)."),
        "chat_template": s.refused("A chat template from the request."),
        "chat_template_kwargs": s.obj("Passed to the chat template."),
        "tools": s.structure({"type": "array", "items": FUNCTION_TOOL}, "Tools, as in chat."),
        "mm_processor_kwargs": s.accepted(s.obj(), "No media part is tokenized."),
        "media_io_kwargs": s.accepted(s.obj(), "No media part is tokenized."),
        "return_token_strs": _STRINGS,
    },
    required=("messages",),
)
DETOKENIZE = RequestSchema(
    {
        "model": _MODEL,
        "tokens": s.structure(
            {"type": "array", "items": {"type": "integer", "minimum": 0}}, "Token ids."
        ),
    },
    required=("tokens",),
)
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
        return TokenizeRequest(_checked_model(body, CHAT), _chat_args(body))
    for name in body:
        if name in CHAT and name not in PROMPT:
            raise invalid(name, f"`{name}` applies to a chat (a body with `messages`) only")
    model = _checked_model(body, PROMPT)
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
    model = _checked_model(body, DETOKENIZE)
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


def _checked_model(body: dict[str, Any], table: RequestSchema) -> str | None:
    """`model` (None when left out), once the body passed `table`'s check."""
    table.check(body)
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
