"""Whisper's tokenizer files for the Hugging Face layout, timestamp tokens included.

The tokenizer.json that CTranslate2 Whisper packages ship ends at <|notimestamps|>: it lacks
the 1,501 timestamp tokens <|0.00|>, <|0.02|>, ..., <|30.00|> that follow it in the model's
vocabulary (the embedding has those rows). mlx-audio finds the first timestamp by name
(`convert_tokens_to_ids("<|0.00|>")`); without it the id is the unknown token's, every
sampled token counts as a timestamp, and a transcript comes out as ".". They are added here,
as Hugging Face's Whisper tokenizers have them: plain (not special) added tokens, with ids
<|notimestamps|> + 1 onwards, so that the vocabulary size equals the embedding's rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from worker.convert.errors import ConversionError
from worker.convert.whisper_layout import SpecialIds

TIMESTAMPS = 1501  # 0.00 .. 30.00 s in 0.02 s steps
MULTILINGUAL_VOCAB = 51865  # multilingual Whisper vocabularies have at least this many ids


def timestamp_tokens() -> list[str]:
    return [f"<|{i * 0.02:.2f}|>" for i in range(TIMESTAMPS)]


def load_tokenizer(path: Path, vocab_size: int) -> Any:
    """The `tokenizers.Tokenizer` of `path`, with the timestamp tokens it lacks added; its
    vocabulary then matches the model's `vocab_size` rows, or ConversionError says why not."""
    from tokenizers import AddedToken, Tokenizer

    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as exc:  # the tokenizers library raises a bare Exception
        raise ConversionError(f"{path}: not a readable tokenizer.json ({exc})") from exc
    no_timestamps = tok.token_to_id("<|notimestamps|>")
    if no_timestamps is None:
        raise ConversionError(f"{path}: no <|notimestamps|> token: not a Whisper tokenizer")
    stamps = timestamp_tokens()
    first = no_timestamps + 1
    if tok.token_to_id(stamps[0]) is None:
        if tok.get_vocab_size(with_added_tokens=True) != first:
            raise ConversionError(
                f"{path}: {tok.get_vocab_size()} tokens, but the timestamps must start at {first}"
            )
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in stamps])
    if tok.token_to_id(stamps[0]) != first or tok.token_to_id(stamps[-1]) != first + TIMESTAMPS - 1:
        raise ConversionError(f"{path}: the timestamp tokens are not right after <|notimestamps|>")
    if tok.get_vocab_size(with_added_tokens=True) != vocab_size:
        raise ConversionError(
            f"the tokenizer has {tok.get_vocab_size()} tokens, the model {vocab_size} rows"
        )
    return tok


def special_ids(tok: Any, vocab_size: int) -> SpecialIds:
    """Whisper's special ids; languages only for multilingual models (by vocabulary size)."""

    def require(token: str) -> int:
        token_id = tok.token_to_id(token)
        if token_id is None:
            raise ConversionError(f"the tokenizer has no {token}")
        return token_id

    sot, translate = require("<|startoftranscript|>"), require("<|translate|>")
    languages: dict[str, int] = {}
    if vocab_size >= MULTILINGUAL_VOCAB:
        languages = {tok.id_to_token(i): i for i in range(sot + 1, translate)}
    return SpecialIds(
        eot=require("<|endoftext|>"),
        sot=sot,
        translate=translate,
        transcribe=require("<|transcribe|>"),
        sot_prev=require("<|startofprev|>"),
        no_timestamps=require("<|notimestamps|>"),
        languages=languages,
    )


def tokenizer_files(tok: Any) -> dict[str, Any]:
    """The other tokenizer files (name -> JSON data) `WhisperProcessor` reads next to
    tokenizer.json: vocab.json, added_tokens.json, tokenizer_config.json,
    special_tokens_map.json. (merges.txt is text: see `merges_text`.)"""
    added = tok.get_added_tokens_decoder()
    decoder = {
        str(i): {
            "content": t.content,
            "lstrip": t.lstrip,
            "normalized": t.normalized,
            "rstrip": t.rstrip,
            "single_word": t.single_word,
            "special": t.special,
        }
        for i, t in sorted(added.items())
    }
    eot = "<|endoftext|>"
    return {
        "vocab.json": tok.get_vocab(with_added_tokens=False),
        "added_tokens.json": {t.content: i for i, t in sorted(added.items())},
        "tokenizer_config.json": {
            "add_prefix_space": False,
            "added_tokens_decoder": decoder,
            "bos_token": eot,
            "clean_up_tokenization_spaces": False,
            "eos_token": eot,
            "errors": "replace",
            "model_max_length": 1024,
            "pad_token": eot,
            "processor_class": "WhisperProcessor",
            "return_attention_mask": False,
            "tokenizer_class": "WhisperTokenizer",
            "unk_token": eot,
        },
        "special_tokens_map.json": {
            "bos_token": eot,
            "eos_token": eot,
            "pad_token": eot,
            "unk_token": eot,
        },
    }


def merges_text(tok: Any) -> str:
    """merges.txt of the tokenizer's BPE model."""
    import json

    merges = json.loads(tok.to_str())["model"]["merges"]
    lines = [m if isinstance(m, str) else " ".join(m) for m in merges]
    return "#version: 0.2\n" + "\n".join(lines) + "\n"
