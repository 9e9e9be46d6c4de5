"""Prompt building: the exact token ids mlx-lm would feed the model for a chat or a completion.

`build_chat_prompt` and `build_completion_prompt` are what a user of mlx-lm gets when calling
it directly (the e2e tests compare against that); `prompt_for` validates a Submit's inputs and
returns its prompt ids, raising RequestError (-> HTTP 400) for input the client can fix.
Pure Python over the tokenizer: no MLX arrays here.

Chats with tools: the tools go to the template as `tools` (they are rendered also with
tool_choice "none", as vLLM does: the model sees them, the server just does not parse calls);
an assistant turn's `tool_calls` get their `arguments` decoded from the JSON text the API
carries into the object most templates expect (Qwen's accepts either, Llama's `tojson`s it),
and its `reasoning_content` reaches templates that render earlier thinking (transformers also
passes it as `thinking`, the name GPT-OSS's template reads). A `developer`
turn is a system turn. A template that cannot render tools gets them in the messages instead
(worker/text/tool_fallback.py): tools are never accepted and left unseen. GPT-OSS's template
needs a description on every tool (one without gets an empty one) and refuses a call turn with
both content and reasoning (the reasoning is left out: the content is that turn's analysis).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from jinja2 import TemplateError
from mlx_lm.tokenizer_utils import TokenizerWrapper

from protocol.inputs import ChatInputs, CompleteInputs, Inputs
from worker.runtime.errors import bad_request, context_length
from worker.text.parsers.registry import detect_harmony
from worker.text.prompt_size import PromptBudget
from worker.text.tool_fallback import template_renders_tools, with_tools_in_messages


class PromptLimits(Protocol):
    """What prompt_for needs to know about the loaded model (worker.text.model.TextModel)."""

    tokenizer: TokenizerWrapper
    max_context: int | None
    vocab_size: int
    prompt_budget: PromptBudget | None


# Keys that build_chat_prompt sets itself; a client may not override them.
_RESERVED_TEMPLATE_KWARGS = frozenset(
    {"conversation", "messages", "add_generation_prompt", "tokenize", "return_dict", "tools"}
)
# And those of a /tokenize chat, whose request has these options as fields of its own.
TOKENIZE_RESERVED_TEMPLATE_KWARGS = _RESERVED_TEMPLATE_KWARGS | {"continue_final_message"}


def build_chat_prompt(
    tokenizer: TokenizerWrapper,
    messages: Sequence[Mapping[str, Any]],
    chat_template_kwargs: Mapping[str, Any] | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
    add_special_tokens: bool = False,
    budget: PromptBudget | None = None,
) -> list[int]:
    """Prompt token ids for a chat, built the way mlx_lm/server.py builds them.

    The template is rendered to text, then encoded without special tokens: what
    `apply_chat_template(tokenize=True)` does inside (mlx-lm's TokenizerWrapper and
    transformers 5 alike), in two steps so that `budget` can refuse a text far past the
    context without encoding all of it (worker/text/prompt_size.py).

    The keyword options are vLLM's /tokenize ones; their defaults are generation's prompt.
    `add_special_tokens` encodes the rendered text with the tokenizer's special tokens on top
    of what the template writes, as vLLM does (a template that writes BOS then has two).
    """
    kwargs = dict(chat_template_kwargs or {})
    if tools:
        kwargs["tools"] = list(tools)
    if continue_final_message:
        kwargs["continue_final_message"] = True
    template_messages = [_template_message(m) for m in messages]
    text = tokenizer.apply_chat_template(
        template_messages,
        add_generation_prompt=add_generation_prompt,
        tokenize=False,
        **kwargs,
    )

    def encode(piece: str) -> list[int]:
        return tokenizer.encode(piece, add_special_tokens=add_special_tokens)

    return budget.encode(encode, text) if budget else [int(t) for t in encode(text)]


def build_completion_prompt(
    tokenizer: TokenizerWrapper,
    prompt: str | Sequence[int],
    budget: PromptBudget | None = None,
) -> list[int]:
    """Prompt token ids for a completion, exactly as `mlx_lm.stream_generate` encodes them.

    A string gets the tokenizer's special tokens unless it already starts with the BOS text
    (`budget`: refused early when far past the context); a list of ids is used as is.
    """
    if isinstance(prompt, str):
        bos = tokenizer.bos_token
        add_special_tokens = bos is None or not prompt.startswith(bos)

        def encode(piece: str) -> list[int]:
            return tokenizer.encode(piece, add_special_tokens=add_special_tokens)

        return budget.encode(encode, prompt) if budget else [int(t) for t in encode(prompt)]
    return [int(t) for t in prompt]


def prompt_for(text_model: PromptLimits, inputs: Inputs) -> list[int]:
    """Validates a Submit's inputs and returns its prompt ids; RequestError when they are bad."""
    if isinstance(inputs, ChatInputs):
        tokens = chat_prompt_tokens(text_model.tokenizer, inputs, budget=text_model.prompt_budget)
    elif isinstance(inputs, CompleteInputs):
        tokens = _completion_tokens(text_model, inputs)
    else:
        raise bad_request(
            f"operation {inputs.op!r} is not supported by this model (chat, complete)"
        )
    if not tokens:
        raise bad_request("the prompt is empty")
    limit = text_model.max_context
    if limit is not None and len(tokens) >= limit:
        raise context_length(len(tokens), limit)
    return tokens


def chat_messages(inputs: ChatInputs) -> list[Any]:
    """A chat Submit's messages (RequestError unless there is one at least)."""
    if not inputs.messages:
        raise bad_request("messages must be a non-empty list")
    return inputs.messages


def template_kwargs(
    inputs: ChatInputs, reserved: frozenset[str] = _RESERVED_TEMPLATE_KWARGS
) -> dict[str, Any]:
    """A chat Submit's chat_template_kwargs, none of them one the template call sets itself."""
    kwargs = inputs.chat_template_kwargs
    taken = sorted(reserved.intersection(kwargs))
    if taken:
        raise bad_request(f"chat_template_kwargs may not set {', '.join(taken)}")
    return dict(kwargs)


def chat_prompt_tokens(
    tokenizer: TokenizerWrapper,
    inputs: ChatInputs,
    *,
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
    add_special_tokens: bool = False,
    budget: PromptBudget | None = None,
) -> list[int]:
    """A chat Submit's prompt ids (tools included); RequestError naming what is malformed,
    or (`budget`) a context_length one for text far past the context, found before the
    template renders it. The keyword options (vLLM's /tokenize) default to generation's."""
    messages = chat_messages(inputs)
    for i, message in enumerate(messages):
        _check_message(i, message)
    if budget is not None:
        budget.check_chars(sum(len(m["content"]) for m in messages))
    kwargs = template_kwargs(inputs)
    tools: Sequence[Mapping[str, Any]] = chat_tools(inputs)
    if not tokenizer.has_chat_template:
        raise bad_request("this model has no chat template; use the completions API")
    if tools and not template_renders_tools(tokenizer):
        # The template would drop them unseen: they go into the messages (tool_fallback.py).
        messages, tools = with_tools_in_messages(messages, tools), []
    if _writes_harmony(tokenizer):
        tools = [_described(tool) for tool in tools]
        messages = [_one_analysis(message) for message in messages]
        effort = kwargs.get("reasoning_effort")
        if isinstance(effort, str):
            kwargs["reasoning_effort"] = HARMONY_EFFORTS.get(effort, effort)
    try:
        return build_chat_prompt(
            tokenizer,
            messages,
            kwargs,
            tools,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
            add_special_tokens=add_special_tokens,
            budget=budget,
        )
    except TemplateError as exc:
        raise bad_request(f"the chat template rejected the messages: {exc}") from exc
    except ValueError as exc:
        if not continue_final_message:
            raise
        # transformers: the final message does not appear in the rendered chat.
        raise bad_request(f"continue_final_message: {exc}") from exc


def chat_tools(inputs: ChatInputs) -> list[Mapping[str, Any]]:
    """The request's tools, checked: OpenAI function tools with a name (RequestError if not)."""
    tools = inputs.tools
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or tool.get("type", "function") != "function":
            raise bad_request(f"tools[{i}] must be an object with type 'function'")
        function = tool.get("function")
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise bad_request(f"tools[{i}].function must be an object with a string 'name'")
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, Mapping):
            raise bad_request(f"tools[{i}].function.parameters must be an object")
    return tools


def _described(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    """The tool with an empty description where it has none: GPT-OSS's template writes every
    tool's description unconditionally (it fails on a tool without one), and OpenAI's harmony
    renderer treats a missing description as empty."""
    function = tool["function"]
    if "description" in function:
        return tool
    return {**tool, "function": {**function, "description": ""}}


# The efforts GPT-OSS was trained on are low, medium and high: the APIs' others map onto them.
HARMONY_EFFORTS = {"none": "low", "minimal": "low", "xhigh": "high", "max": "high"}
_harmony_tokenizers: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _writes_harmony(tokenizer: TokenizerWrapper) -> bool:
    """Whether the chat template is GPT-OSS's harmony (decided once per tokenizer)."""
    known = _harmony_tokenizers.get(tokenizer)
    if known is None:
        template = tokenizer.chat_template
        known = isinstance(template, str) and detect_harmony(template, tokenizer.get_vocab())
        _harmony_tokenizers[tokenizer] = known
    return known


def _one_analysis(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """A call turn that has both a preamble (content) and reasoning, without the reasoning.

    GPT-OSS's template renders a call turn's content or its thinking (transformers passes
    `reasoning_content` as `thinking`) as the analysis before the call, and refuses both;
    harmony output parsed here has both when the model wrote a commentary preamble."""
    if not (message.get("tool_calls") and message.get("content")):
        return message
    return {k: v for k, v in message.items() if k not in ("reasoning_content", "reasoning")}


def _check_message(i: int, message: Any) -> None:
    if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
        raise bad_request(f"messages[{i}] must be an object with a string 'role'")
    if not isinstance(message.get("content"), str):
        raise bad_request(f"messages[{i}].content must be a string")
    tool_calls = message.get("tool_calls")
    if tool_calls is None:
        return
    if message["role"] != "assistant" or not isinstance(tool_calls, list):
        raise bad_request(f"messages[{i}].tool_calls must be a list on an assistant message")
    for j, call in enumerate(tool_calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise bad_request(f"messages[{i}].tool_calls[{j}].function must have a string 'name'")
        if not isinstance(function.get("arguments", ""), (str, Mapping)):
            raise bad_request(f"messages[{i}].tool_calls[{j}].function.arguments must be a string")


def _template_message(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """The message as chat templates expect it (see the module docstring)."""
    if message.get("role") == "developer":
        message = {**message, "role": "system"}
    tool_calls = message.get("tool_calls")
    if not tool_calls:
        return message
    calls = []
    for call in tool_calls:
        function = dict(call["function"])
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                decoded = json.loads(arguments or "{}")
            except ValueError:
                decoded = None
            if isinstance(decoded, dict):
                function["arguments"] = decoded
        calls.append({**call, "function": function})
    return {**message, "tool_calls": calls}


def _completion_tokens(text_model: PromptLimits, inputs: CompleteInputs) -> list[int]:
    prompt = inputs.prompt
    if isinstance(prompt, str):
        return build_completion_prompt(text_model.tokenizer, prompt, text_model.prompt_budget)
    if text_model.max_context is not None and len(prompt) >= text_model.max_context:
        raise context_length(len(prompt), text_model.max_context)
    for i, token in enumerate(prompt):
        if isinstance(token, bool) or not isinstance(token, int):
            raise bad_request(f"prompt[{i}] is not a token id: {token!r}")
        if not 0 <= token < text_model.vocab_size:
            raise bad_request(
                f"prompt[{i}] = {token} is out of range (vocabulary size {text_model.vocab_size})"
            )
    return build_completion_prompt(text_model.tokenizer, prompt)
