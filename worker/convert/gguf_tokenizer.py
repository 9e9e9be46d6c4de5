"""tokenizer.json, tokenizer_config.json and special_tokens_map.json rebuilt from GGUF metadata.

A GGUF file of a byte-level BPE model (`tokenizer.ggml.model` = "gpt2") carries the whole
vocabulary (`tokens`, in id order, in byte-level form: "Ġthe"), the `merges` ("Ġ t"), each
token's type (control tokens are the special ones), the bos / eos / pad / unk ids, whether a
bos is prepended, the chat template, and `tokenizer.ggml.pre`: the name llama.cpp gives the
pre-tokenizer (the regex that splits text before BPE). The `tokenizers` library rebuilds the
Hugging Face pipeline from these; PRE_TOKENIZERS maps each supported name to the pipeline the
original tokenizer.json has. SentencePiece vocabularies (`tokenizer.ggml.model` = "llama")
are not supported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from worker.convert.errors import ConversionError
from worker.convert.gguf_tensors import GgufFile

# llama.cpp's token types (gguf.TokenType).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

GPT2_REGEX = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
QWEN2_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


@dataclass(frozen=True)
class PreTokenizer:
    """The Hugging Face pipeline behind one `tokenizer.ggml.pre` name."""

    # A regex split (isolated) before the byte-level mapping; None: ByteLevel's own GPT-2 regex.
    split_regex: str | None = None
    individual_digits: bool = False  # a Digits(individual_digits) split first
    nfc: bool = False  # an NFC normalizer
    ignore_merges: bool = False  # whole words found in the vocabulary skip the merges
    clean_up_spaces: bool = True  # tokenizer_config's clean_up_tokenization_spaces


_GPT2 = PreTokenizer()
_DIGITS = PreTokenizer(individual_digits=True)
_LLAMA3 = PreTokenizer(split_regex=LLAMA3_REGEX, ignore_merges=True)
_QWEN2 = PreTokenizer(split_regex=QWEN2_REGEX, nfc=True, clean_up_spaces=False)
PRE_TOKENIZERS = {
    # "default" is what llama.cpp's converter writes for a tokenizer it does not recognise;
    # GPT-2's byte-level split is the common case behind it.
    "default": _GPT2,
    "gpt-2": _GPT2,
    "phi-2": _GPT2,
    "mpt": _GPT2,
    "olmo": _GPT2,
    "smollm": PreTokenizer(individual_digits=True, clean_up_spaces=False),
    "starcoder": _DIGITS,
    "refact": _DIGITS,
    "codeshell": _DIGITS,
    "llama-bpe": _LLAMA3,
    "llama3": _LLAMA3,
    "llama-v3": _LLAMA3,
    "qwen2": _QWEN2,
    "deepseek-r1-qwen": _QWEN2,
}


@dataclass(frozen=True)
class GgufVocabulary:
    """The tokenizer part of the metadata, checked."""

    tokens: list[str]
    types: list[int]
    merges: list[tuple[str, str]]
    pre: str
    bos_id: int | None
    eos_id: int | None
    pad_id: int | None
    unk_id: int | None
    add_bos: bool
    add_eos: bool
    chat_template: str | None


def read_vocabulary(source: GgufFile) -> GgufVocabulary:
    meta = source.metadata
    model = source.require("tokenizer.ggml.model")
    if model != "gpt2":
        raise ConversionError(
            f"tokenizer model {model!r} is not supported (only byte-level BPE, 'gpt2')"
        )
    pre = meta.get("tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise ConversionError(
            f"pre-tokenizer {pre!r} is not supported (supported: {', '.join(PRE_TOKENIZERS)})"
        )
    tokens = list(source.require("tokenizer.ggml.tokens"))
    types = list(meta.get("tokenizer.ggml.token_type", [NORMAL] * len(tokens)))
    if len(types) != len(tokens):
        raise ConversionError(f"{len(types)} token types for {len(tokens)} tokens")
    merges = []
    for merge in source.require("tokenizer.ggml.merges"):
        pair = merge.split(" ")
        if len(pair) != 2:
            raise ConversionError(f"merge {merge!r} is not two tokens separated by a space")
        merges.append((pair[0], pair[1]))

    def token_id(key: str) -> int | None:
        value = meta.get(f"tokenizer.ggml.{key}")
        if value is None:
            return None
        if not 0 <= int(value) < len(tokens):
            raise ConversionError(f"tokenizer.ggml.{key} {value} is outside the vocabulary")
        return int(value)

    return GgufVocabulary(
        tokens=tokens,
        types=[int(t) for t in types],
        merges=merges,
        pre=pre,
        bos_id=token_id("bos_token_id"),
        eos_id=token_id("eos_token_id"),
        pad_id=token_id("padding_token_id"),
        unk_id=token_id("unknown_token_id"),
        add_bos=bool(meta.get("tokenizer.ggml.add_bos_token", False)),
        add_eos=bool(meta.get("tokenizer.ggml.add_eos_token", False)),
        chat_template=meta.get("tokenizer.chat_template"),
    )


def added_tokens(vocab: GgufVocabulary) -> list[tuple[int, str, bool]]:
    """(id, content, special) of the tokens matched whole before BPE: control tokens
    (special) and user-defined ones (not special), in id order."""
    return [
        (i, token, kind == CONTROL)
        for i, (token, kind) in enumerate(zip(vocab.tokens, vocab.types, strict=True))
        if kind in (CONTROL, USER_DEFINED)
    ]


def build_tokenizer(vocab: GgufVocabulary) -> Any:
    """The `tokenizers.Tokenizer` equivalent of the GGUF vocabulary (ids unchanged)."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    recipe = PRE_TOKENIZERS[vocab.pre]
    ids: dict[str, int] = {}
    for i, token in enumerate(vocab.tokens):
        ids.setdefault(token, i)  # a duplicated string keeps its first id
    tok = Tokenizer(models.BPE(vocab=ids, merges=vocab.merges, ignore_merges=recipe.ignore_merges))
    if recipe.nfc:
        tok.normalizer = normalizers.NFC()
    steps = []
    if recipe.individual_digits:
        steps.append(pre_tokenizers.Digits(individual_digits=True))
    if recipe.split_regex is not None:
        steps.append(pre_tokenizers.Split(Regex(recipe.split_regex), behavior="isolated"))
    steps.append(
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=recipe.split_regex is None)
    )
    tok.pre_tokenizer = steps[0] if len(steps) == 1 else pre_tokenizers.Sequence(steps)
    tok.decoder = decoders.ByteLevel()

    for i, content, special in added_tokens(vocab):
        token = AddedToken(content, special=special, normalized=False)
        (tok.add_special_tokens if special else tok.add_tokens)([token])
        if tok.token_to_id(content) != i:
            raise ConversionError(f"added token {content!r} would not keep its id {i}")

    byte_level = processors.ByteLevel(trim_offsets=False)
    template = _template(vocab)
    if template is None:
        tok.post_processor = byte_level
    else:
        single, pair, specials = template
        tok.post_processor = processors.Sequence(
            [
                byte_level,
                processors.TemplateProcessing(single=single, pair=pair, special_tokens=specials),
            ]
        )
    return tok


def _template(vocab: GgufVocabulary) -> tuple[str, str, list[tuple[str, int]]] | None:
    """The post-processor template that adds bos / eos as the GGUF says, or None."""
    bos = vocab.tokens[vocab.bos_id] if vocab.add_bos and vocab.bos_id is not None else None
    eos = vocab.tokens[vocab.eos_id] if vocab.add_eos and vocab.eos_id is not None else None
    if bos is None and eos is None:
        return None
    single = " ".join(x for x in (bos, "$A", eos) if x)
    second = (f"{bos}:1" if bos else None, "$B:1", f"{eos}:1" if eos else None)
    pair = " ".join(x for x in (bos, "$A", eos, *second) if x)
    ids = {bos: vocab.bos_id, eos: vocab.eos_id}
    specials = [(token, ids[token]) for token in dict.fromkeys((bos, eos)) if token]
    return single, pair, specials


def tokenizer_config(vocab: GgufVocabulary, model_max_length: int) -> dict[str, Any]:
    """tokenizer_config.json: special tokens, the chat template, bos / eos behaviour."""

    def content(token_id: int | None) -> str | None:
        return vocab.tokens[token_id] if token_id is not None else None

    decoder = {
        str(i): {
            "content": token,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": special,
        }
        for i, token, special in added_tokens(vocab)
    }
    config: dict[str, Any] = {
        "add_bos_token": vocab.add_bos,
        "add_eos_token": vocab.add_eos,
        "added_tokens_decoder": decoder,
        "bos_token": content(vocab.bos_id),
        "clean_up_tokenization_spaces": PRE_TOKENIZERS[vocab.pre].clean_up_spaces,
        "eos_token": content(vocab.eos_id),
        "model_max_length": model_max_length,
        "pad_token": content(vocab.pad_id),
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": content(vocab.unk_id),
    }
    if vocab.chat_template:
        config["chat_template"] = vocab.chat_template
    return config


def special_tokens_map(vocab: GgufVocabulary) -> dict[str, str]:
    """special_tokens_map.json: the named special tokens the GGUF has."""
    named = {
        "bos_token": vocab.bos_id,
        "eos_token": vocab.eos_id,
        "pad_token": vocab.pad_id,
        "unk_token": vocab.unk_id,
    }
    return {name: vocab.tokens[i] for name, i in named.items() if i is not None}
