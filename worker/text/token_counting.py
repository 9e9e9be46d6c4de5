"""The tokenizer's control calls: count_tokens, tokenize and detokenize, without generating.

The gateway's `count_tokens` control call (Anthropic `/v1/messages/count_tokens`) carries the
same chat inputs a Submit would; the count is the length of the prompt the same builder makes
(template, tools and all), so it always equals the request's `prompt_tokens`. `tokenize`
(vLLM's `/tokenize`) returns those prompt ids themselves, of a chat or of a completion's prompt
text (encoded as a completion encodes it), and `detokenize` decodes ids back to text.

They run on the worker's receiver thread, not the MLX thread: they touch only the tokenizer
(Jinja rendering and a Rust `encode` / `decode`, which may run while the MLX thread decodes:
neither changes the tokenizer's state).
"""

from __future__ import annotations

from typing import Any

from protocol.inputs import ChatInputs
from protocol.messages import DetokenizeArgs, TokenizeArgs
from worker.runtime.errors import bad_request
from worker.text.prompts import (
    TOKENIZE_RESERVED_TEMPLATE_KWARGS,
    build_completion_prompt,
    chat_prompt_tokens,
    template_kwargs,
)


def count_chat_tokens(tokenizer: Any, inputs: ChatInputs) -> int:
    """The prompt length for chat `inputs` (RequestError when they are malformed)."""
    return len(chat_prompt_tokens(tokenizer, inputs))


def tokenize(tokenizer: Any, args: TokenizeArgs) -> dict[str, Any]:
    """{"tokens": ids, "token_strs": their strings or None} (RequestError when malformed)."""
    if args.prompt is not None:
        if args.add_special_tokens is False:
            tokens = [int(t) for t in tokenizer.encode(args.prompt, add_special_tokens=False)]
        else:  # the completion's own encoding: special tokens, but no second BOS
            tokens = build_completion_prompt(tokenizer, args.prompt)
    elif args.chat is not None:
        template_kwargs(args.chat, TOKENIZE_RESERVED_TEMPLATE_KWARGS)
        if args.continue_final_message and args.add_generation_prompt:
            raise bad_request("continue_final_message and add_generation_prompt exclude each other")
        tokens = chat_prompt_tokens(
            tokenizer,
            args.chat,
            add_generation_prompt=args.add_generation_prompt,
            continue_final_message=args.continue_final_message,
            add_special_tokens=bool(args.add_special_tokens),
        )
    else:
        raise bad_request("tokenize needs a prompt or a chat")
    strings = list(tokenizer.convert_ids_to_tokens(tokens)) if args.return_token_strs else None
    return {"tokens": tokens, "token_strs": strings}


def detokenize(tokenizer: Any, args: DetokenizeArgs) -> dict[str, Any]:
    """{"prompt": the text of the ids}; RequestError naming an id outside the vocabulary."""
    size = len(tokenizer)
    for i, token in enumerate(args.tokens):
        if not 0 <= token < size:
            raise bad_request(
                f"`tokens[{i}]` = {token} is not a token id of this model "
                f"(its vocabulary has {size} tokens)"
            )
    return {"prompt": tokenizer.decode(args.tokens)}


class TokenizerCalls:
    """The control calls of one loaded tokenizer, as the receiver thread answers them."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def count_tokens(self, inputs: ChatInputs) -> int:
        return count_chat_tokens(self._tokenizer, inputs)

    def tokenize(self, args: TokenizeArgs) -> dict[str, Any]:
        return tokenize(self._tokenizer, args)

    def detokenize(self, args: DetokenizeArgs) -> dict[str, Any]:
        return detokenize(self._tokenizer, args)
