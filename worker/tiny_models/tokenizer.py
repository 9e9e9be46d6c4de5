"""Real byte-level BPE tokenizers for the tiny test checkpoints, trained in about a second.

A tokenizer is trained with the `tokenizers` library on a fixed, sorted, byte-capped slice of
the Python standard library's own sources (present on every machine, no download), then saved
in the files a real Hugging Face checkpoint ships: `tokenizer.json`, `tokenizer_config.json`
(with an inline `chat_template` and `additional_special_tokens`, which both transformers 4 and
5 read; transformers 5 itself would write `chat_template.jinja` and `extra_special_tokens`,
which older loaders miss) and `special_tokens_map.json`.

Each family (`QWEN2`, `LLAMA3`) copies its real counterpart's pipeline: pre-tokenizer regex,
normalizer, post-processor, special tokens appended after the BPE vocabulary, and chat template.
"""

from __future__ import annotations

import json
import sysconfig
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

# Bytes of corpus per vocabulary entry: enough for the trainer to reach the requested size.
CORPUS_BYTES_PER_TOKEN = 256
MIN_CORPUS_BYTES = 1 << 20

QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
LLAMA3_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

# The Qwen3 template as published with the Qwen3 checkpoints: ChatML turns, tools in a system
# block, <tool_call> JSON, tool results as <tool_response> in a user turn, reasoning kept only
# after the last user query, and an empty think block when enable_thinking is false.
QWEN3_CHAT_TEMPLATE = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}"""

# The Meta-Llama-3-Instruct template: the template (not the tokenizer) puts bos_token first.
LLAMA3_CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}"
)


@dataclass(frozen=True)
class TokenizerSpec:
    """One tokenizer family: its pipeline, its added tokens (in id order) and its config."""

    pretokenize_regex: str
    nfc: bool
    # (content, special): appended after the BPE vocabulary, in this order, like the real ones.
    added_tokens: tuple[tuple[str, bool], ...]
    bos_token: str | None
    eos_token: str
    pad_token: str | None
    additional_special_tokens: tuple[str, ...]
    chat_template: str | None  # None: the model has no chat template (speech models)
    tokenizer_class: str
    # True: the post-processor prepends bos_token on encode(add_special_tokens=True).
    post_processor_adds_bos: bool
    extra_config: dict[str, Any] = field(default_factory=dict)


QWEN2 = TokenizerSpec(
    pretokenize_regex=QWEN2_PRETOKENIZE_REGEX,
    nfc=True,
    added_tokens=(
        ("<|endoftext|>", True),
        ("<|im_start|>", True),
        ("<|im_end|>", True),
        ("<tool_call>", False),
        ("</tool_call>", False),
        ("<tool_response>", False),
        ("</tool_response>", False),
        ("<think>", False),
        ("</think>", False),
    ),
    bos_token=None,
    eos_token="<|im_end|>",
    pad_token="<|endoftext|>",
    additional_special_tokens=("<|im_start|>", "<|im_end|>"),
    chat_template=QWEN3_CHAT_TEMPLATE,
    tokenizer_class="Qwen2Tokenizer",
    post_processor_adds_bos=False,
    extra_config={
        "add_bos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "errors": "replace",
        "split_special_tokens": False,
        "unk_token": None,
    },
)


def qwen_tokenizer(
    added_tokens: tuple[tuple[str, bool], ...], chat_template: str | None, **extra_config: Any
) -> TokenizerSpec:
    """A Qwen2-family tokenizer (QWEN2's pipeline and config) with its own added tokens and
    template, as the Qwen-VL and Qwen-Omni checkpoints ship: every special added token but
    the first (<|endoftext|>) listed as additional; `extra_config` joins QWEN2's."""
    return TokenizerSpec(
        pretokenize_regex=QWEN2.pretokenize_regex,
        nfc=True,
        added_tokens=added_tokens,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=tuple(t for t, special in added_tokens[1:] if special),
        chat_template=chat_template,
        tokenizer_class="Qwen2Tokenizer",
        post_processor_adds_bos=False,
        extra_config={**QWEN2.extra_config, **extra_config},
    )


LLAMA3 = TokenizerSpec(
    pretokenize_regex=LLAMA3_PRETOKENIZE_REGEX,
    nfc=False,
    added_tokens=(
        ("<|begin_of_text|>", True),
        ("<|end_of_text|>", True),
        ("<|reserved_special_token_0|>", True),
        ("<|reserved_special_token_1|>", True),
        ("<|finetune_right_pad_id|>", True),
        ("<|reserved_special_token_2|>", True),
        ("<|start_header_id|>", True),
        ("<|end_header_id|>", True),
        ("<|eom_id|>", True),
        ("<|eot_id|>", True),
        ("<|python_tag|>", True),
    ),
    bos_token="<|begin_of_text|>",
    eos_token="<|eot_id|>",
    pad_token=None,
    additional_special_tokens=(),
    chat_template=LLAMA3_CHAT_TEMPLATE,
    tokenizer_class="PreTrainedTokenizerFast",
    post_processor_adds_bos=True,
    extra_config={
        "clean_up_tokenization_spaces": False,
        "model_input_names": ["input_ids", "attention_mask"],
    },
)


def stdlib_corpus(max_bytes: int) -> Iterator[str]:
    """Yield the sorted top-level stdlib `*.py` sources until `max_bytes` have been yielded."""
    root = Path(sysconfig.get_paths()["stdlib"])
    total = 0
    for path in sorted(root.glob("*.py")):
        if total >= max_bytes:
            return
        data = path.read_bytes()[: max_bytes - total]
        total += len(data)
        yield data.decode("utf-8", errors="replace")


def train_tokenizer(spec: TokenizerSpec, vocab_size: int) -> Tokenizer:
    """Train a byte-level BPE of exactly `vocab_size` ids, the added tokens last."""
    bpe_size = vocab_size - len(spec.added_tokens)
    tok = Tokenizer(models.BPE())
    if spec.nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(spec.pretokenize_regex), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=bpe_size,
        min_frequency=2,
        show_progress=False,
        # Every byte gets an id, so any text (emoji, CJK, binary junk) round-trips.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus_bytes = max(MIN_CORPUS_BYTES, CORPUS_BYTES_PER_TOKEN * vocab_size)
    tok.train_from_iterator(stdlib_corpus(corpus_bytes), trainer)
    if tok.get_vocab_size() != bpe_size:
        raise RuntimeError(
            f"BPE training reached {tok.get_vocab_size()} tokens, wanted {bpe_size}: "
            "the standard-library corpus is too small for this vocabulary"
        )
    for content, special in spec.added_tokens:
        token = AddedToken(content, special=special, normalized=False)
        if special:
            tok.add_special_tokens([token])
        else:
            tok.add_tokens([token])

    byte_level = processors.ByteLevel(trim_offsets=False)
    if spec.post_processor_adds_bos:
        assert spec.bos_token is not None, spec.tokenizer_class
        bos, bos_id = spec.bos_token, id_of(tok)(spec.bos_token)
        template = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos}:1 $B:1", special_tokens=[(bos, bos_id)]
        )
        tok.post_processor = processors.Sequence([byte_level, template])
    else:
        tok.post_processor = byte_level
    return tok


def _added_tokens_decoder(spec: TokenizerSpec, tok: Tokenizer) -> dict[str, dict[str, Any]]:
    return {
        str(tok.token_to_id(content)): {
            "content": content,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": special,
        }
        for content, special in spec.added_tokens
    }


def write_tokenizer_files(
    spec: TokenizerSpec, tok: Tokenizer, out_dir: Path, model_max_length: int
) -> None:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json into `out_dir`."""
    tok.save(str(out_dir / "tokenizer.json"))
    config: dict[str, Any] = {
        "added_tokens_decoder": _added_tokens_decoder(spec, tok),
        "additional_special_tokens": list(spec.additional_special_tokens),
        "bos_token": spec.bos_token,
        "chat_template": spec.chat_template,
        "eos_token": spec.eos_token,
        "model_max_length": model_max_length,
        "pad_token": spec.pad_token,
        "tokenizer_class": spec.tokenizer_class,
        **spec.extra_config,
    }
    special_map: dict[str, Any] = {
        name: value
        for name, value in (
            ("bos_token", spec.bos_token),
            ("eos_token", spec.eos_token),
            ("pad_token", spec.pad_token),
        )
        if value is not None
    }
    if spec.additional_special_tokens:
        special_map["additional_special_tokens"] = list(spec.additional_special_tokens)
    write_json(out_dir / "tokenizer_config.json", config)
    write_json(out_dir / "special_tokens_map.json", special_map)


def write_json(path: Path, data: Any) -> None:
    """A checkpoint's JSON file, as every builder writes it: sorted keys, 2-space indent."""
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def id_of(tok: Tokenizer) -> Callable[[str], int]:
    """`tok.token_to_id` for tokens the builder put there itself: a KeyError, never None."""

    def token_id(token: str) -> int:
        found = tok.token_to_id(token)
        if found is None:
            raise KeyError(f"{token!r} is not in the tokenizer")
        return found

    return token_id
