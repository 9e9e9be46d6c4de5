"""The tokenizer's control calls: count_tokens, tokenize and detokenize, without generating.

The gateway's `count_tokens` control call (Anthropic `/v1/messages/count_tokens`) carries the
same chat inputs a Submit would; the count is the length of the prompt the same builder makes
(template, tools and all), so it always equals the request's `prompt_tokens`. `tokenize`
(vLLM's `/tokenize`) returns those prompt ids themselves, of a chat or of a completion's prompt
text (encoded as a completion encodes it), and `detokenize` decodes ids back to text.

They run on the worker's receiver thread, not the MLX thread: they touch only the tokenizer
(Jinja rendering and a Rust `encode` / `decode`, which may run while the MLX thread decodes:
neither changes the tokenizer's state). A prompt past the model's context is a context_length
error, found without tokenizing it all (worker/text/prompt_size.py), so no call holds the
receiver thread for long or returns more ids than a context holds.
"""

from __future__ import annotations

from typing import Any

from protocol.inputs import ChatInputs
from protocol.messages import DetokenizeArgs, TokenizeArgs, Tokenized
from worker.runtime.errors import bad_request, context_length
from worker.text.prompt_size import PromptBudget
from worker.text.prompts import (
    TOKENIZE_RESERVED_TEMPLATE_KWARGS,
    build_completion_prompt,
    chat_prompt_tokens,
    template_kwargs,
)


def count_chat_tokens(
    tokenizer: Any, inputs: ChatInputs, budget: PromptBudget | None = None
) -> int:
    """The prompt length for chat `inputs` (RequestError when they are malformed, or past
    `budget`'s context)."""
    return len(chat_prompt_tokens(tokenizer, inputs, budget=budget))


def tokenize(tokenizer: Any, args: TokenizeArgs, budget: PromptBudget | None = None) -> Tokenized:
    """The ids, and their strings when asked (RequestError when malformed, or
    when the prompt is past `budget`'s context: the ids are never more than a context)."""
    if args.prompt is not None:
        if args.add_special_tokens is False:
            tokens = _encode_plain(tokenizer, args.prompt, budget)
        else:  # the completion's own encoding: special tokens, but no second BOS
            tokens = build_completion_prompt(tokenizer, args.prompt, budget)
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
            budget=budget,
        )
    else:
        raise bad_request("tokenize needs a prompt or a chat")
    if budget is not None and len(tokens) >= budget.limit:
        raise context_length(len(tokens), budget.limit)
    strings = list(tokenizer.convert_ids_to_tokens(tokens)) if args.return_token_strs else None
    return Tokenized([int(t) for t in tokens], strings)


def _encode_plain(tokenizer: Any, text: str, budget: PromptBudget | None) -> list[int]:
    def encode(piece: str) -> list[int]:
        return tokenizer.encode(piece, add_special_tokens=False)

    return budget.encode(encode, text) if budget else [int(t) for t in encode(text)]


def detokenize(tokenizer: Any, args: DetokenizeArgs) -> str:
    """The text of the ids; RequestError naming an id outside the vocabulary."""
    size = len(tokenizer)
    for i, token in enumerate(args.tokens):
        if not 0 <= token < size:
            raise bad_request(
                f"`tokens[{i}]` = {token} is not a token id of this model "
                f"(its vocabulary has {size} tokens)"
            )
    return str(tokenizer.decode(args.tokens))


# count_tokens counts prompts up to this many contexts: Anthropic's context-management edits
# decide on the count of a prompt that is over the context (and that they may bring under it).
COUNT_CONTEXTS = 4


class TokenizerCalls:
    """The control calls of one loaded tokenizer, as the receiver thread answers them: never
    more ids than the model's context (`max_context`), nor work past it."""

    def __init__(self, tokenizer: Any, max_context: int | None = None) -> None:
        self._tokenizer = tokenizer
        self._budget = PromptBudget.of(tokenizer, max_context)
        counted = max_context * COUNT_CONTEXTS if max_context else None
        self._count_budget = PromptBudget.of(tokenizer, counted)

    def count_tokens(self, inputs: ChatInputs) -> int:
        return count_chat_tokens(self._tokenizer, inputs, self._count_budget)

    def tokenize(self, args: TokenizeArgs) -> Tokenized:
        return tokenize(self._tokenizer, args, self._budget)

    def detokenize(self, args: DetokenizeArgs) -> str:
        return detokenize(self._tokenizer, args)
