"""Measures grammar libraries for constrained decoding: compile time, per-token mask time, coverage.

Candidates: llguidance, outlines-core, lm-format-enforcer (xgrammar needs torch at import time,
so it cannot run in this torch-free worker). Each is driven the way a logits processor drives it:
compile a JSON schema once, then for every token of a valid instance compute the allowed-token
mask and consume the token. Libraries that are not installed are skipped; put candidates on
PYTHONPATH (e.g. `pip install --target /tmp/gramlibs outlines-core lm-format-enforcer`).

Usage: `python -m scripts.bench_grammar_libs [--large]` (--large also trains a 64k-entry BPE
on the standard library's sources, closer to a real model's vocabulary than the test ones).
The results and the choice are in docs/structured-output.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from worker.tiny_models import ensure_checkpoint

SCHEMAS: dict[str, tuple[dict[str, Any], Any]] = {
    "nested": (
        {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "age": {"type": "integer"},
                "address": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                    "required": ["city", "zip"],
                    "additionalProperties": False,
                },
            },
            "required": ["name", "age", "address"],
            "additionalProperties": False,
        },
        {"name": "Ada Lovelace", "age": 36, "address": {"city": "London", "zip": "W1"}},
    ),
    "array_enum": (
        {
            "type": "object",
            "properties": {
                "tags": {
                    "type": "array",
                    "items": {"enum": ["red", "green", "blue"]},
                    "minItems": 1,
                    "maxItems": 4,
                },
                "mode": {"const": "fast"},
                "scores": {"type": "array", "items": {"type": "number"}},
            },
            "required": ["tags", "mode", "scores"],
            "additionalProperties": False,
        },
        {"tags": ["red", "blue"], "mode": "fast", "scores": [1.5, -2, 3e2]},
    ),
    "anyof": (
        {
            "type": "object",
            "properties": {
                "value": {
                    "anyOf": [
                        {"type": "integer", "minimum": 0, "maximum": 100},
                        {"type": "string", "maxLength": 8},
                        {"type": "null"},
                    ]
                }
            },
            "required": ["value"],
            "additionalProperties": False,
        },
        {"value": "eight"},
    ),
    "ref_recursive": (
        {
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {
                        "label": {"type": "string"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                    },
                    "required": ["label", "children"],
                    "additionalProperties": False,
                }
            },
            "$ref": "#/$defs/node",
        },
        {"label": "root", "children": [{"label": "leaf", "children": []}]},
    ),
    "formats_patterns": (
        {
            "type": "object",
            "properties": {
                "when": {"type": "string", "format": "date-time"},
                "id": {"type": "string", "format": "uuid"},
                "email": {"type": "string", "format": "email"},
                "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                "note": {"type": "string", "minLength": 2, "maxLength": 20},
            },
            "required": ["when", "id", "email", "code", "note"],
            "additionalProperties": False,
        },
        {
            "when": "2024-05-01T12:30:00Z",
            "id": "123e4567-e89b-12d3-a456-426614174000",
            "email": "ada@example.com",
            "code": "ABC-1234",
            "note": "hello there",
        },
    ),
    "open_object": ({"type": "object"}, {"a": [1, {"b": None}], "c": "d"}),
}


def _byte_tokens(hf: PreTrainedTokenizerFast) -> list[bytes | None]:
    """Each id's raw bytes (byte-level BPE), None for special tokens."""
    from mlx_lm.tokenizer_utils import _byte_decoder

    decoder = _byte_decoder()
    special = set(hf.all_special_ids)
    result: list[bytes | None] = []
    for token_id in range(len(hf)):
        if token_id in special:
            result.append(None)
            continue
        piece = hf.convert_ids_to_tokens(token_id)
        try:
            result.append(bytes(decoder[c] for c in piece))
        except KeyError:  # an added token written as plain text
            result.append(piece.encode())
    return result


class LLGuidance:
    name = "llguidance"

    def __init__(self, hf: PreTrainedTokenizerFast) -> None:
        import llguidance
        import llguidance.hf

        self.llg = llguidance
        self.tok = llguidance.hf.from_tokenizer(hf, n_vocab=len(hf))
        self.mask = np.zeros(((len(hf) + 31) // 32,), dtype=np.int32)

    def compile(self, schema: dict[str, Any]) -> Any:
        grammar = self.llg.LLMatcher.grammar_from_json_schema(
            schema, defaults={"whitespace_flexible": False}
        )
        matcher = self.llg.LLMatcher(self.tok, grammar, log_level=0)
        if matcher.is_error():
            raise ValueError(matcher.get_error())
        return matcher

    def step(self, matcher: Any, token: int | None) -> None:
        if token is not None and not matcher.consume_token(token):
            raise ValueError(matcher.get_error())
        matcher.unsafe_compute_mask_ptr(self.mask.ctypes.data, self.mask.nbytes)


class OutlinesCore:
    name = "outlines-core"

    def __init__(self, hf: PreTrainedTokenizerFast) -> None:
        import outlines_core

        self.oc = outlines_core
        eos = hf.eos_token_id
        mapping: dict[bytes, list[int]] = {}
        for token_id, raw in enumerate(_byte_tokens(hf)):
            if raw is not None and token_id != eos:
                mapping.setdefault(raw, []).append(token_id)
        self.vocab = outlines_core.Vocabulary(eos, mapping)
        self.mask = np.zeros(((len(hf) + 31) // 32,), dtype=np.int32)

    def compile(self, schema: dict[str, Any]) -> Any:
        regex = self.oc.json_schema.build_regex_from_schema(json.dumps(schema), "")
        return self.oc.Guide(self.oc.Index(regex, self.vocab))

    def step(self, guide: Any, token: int | None) -> None:
        if token is not None:
            guide.advance(token)
        guide.write_mask_into(self.mask.ctypes.data, self.mask.size, self.mask.itemsize)


class FormatEnforcer:
    name = "lm-format-enforcer"

    def __init__(self, hf: PreTrainedTokenizerFast) -> None:
        import lmformatenforcer as lmfe

        self.lmfe = lmfe
        zero = hf.encode("0", add_special_tokens=False)[-1]
        special = set(hf.all_special_ids)
        regular = []
        for token_id in range(len(hf)):
            if token_id in special:
                continue
            after_zero = hf.decode([zero, token_id])[1:]
            regular.append((token_id, after_zero, len(after_zero) > len(hf.decode([token_id]))))
        self.data = lmfe.TokenEnforcerTokenizerData(
            regular, lambda ids: hf.decode(ids).rstrip("\ufffd"), hf.eos_token_id, False, len(hf)
        )
        self.prefix: list[int] = []

    def compile(self, schema: dict[str, Any]) -> Any:
        self.prefix = []
        return self.lmfe.TokenEnforcer(self.data, self.lmfe.JsonSchemaParser(schema))

    def step(self, enforcer: Any, token: int | None) -> None:
        if token is not None:
            self.prefix.append(token)
        enforcer.get_allowed_tokens(self.prefix)


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def bench_one(lib: Any, hf: PreTrainedTokenizerFast, schema: dict, instance: Any) -> dict:
    try:
        state, compile_s = _timed(lambda: lib.compile(schema))
    except Exception as exc:  # coverage: a library that cannot compile the schema
        return {"error": f"compile: {str(exc).splitlines()[0][:90]}"}
    tokens = hf.encode(json.dumps(instance, separators=(",", ":")), add_special_tokens=False)
    times = []
    try:
        for i, token in enumerate([None, *tokens]):
            _, seconds = _timed(lambda t=token: lib.step(state, t))
            times.append(seconds)
            if i > 200:
                break
    except Exception as exc:
        return {"compile_ms": compile_s * 1e3, "error": f"walk: {str(exc)[:90]}"}
    return {
        "compile_ms": compile_s * 1e3,
        "mask_us_median": statistics.median(times[1:]) * 1e6,
        "mask_us_max": max(times[1:]) * 1e6,
        "tokens": len(times) - 1,
    }


def _large_tokenizer(vocab: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE of `vocab` entries trained on the whole standard library (cached)."""
    path = Path(f"/tmp/vomlx-bench-bpe-{vocab}.json")
    if not path.exists():
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab - 1,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
        root = Path(sysconfig.get_paths()["stdlib"])
        files = (p.read_text(errors="replace") for p in sorted(root.rglob("*.py")))
        tok.train_from_iterator(files, trainer)
        tok.add_special_tokens(["<|im_end|>"])
        tok.save(str(path))
    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token="<|im_end|>")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="also a 64k-entry vocabulary")
    args = parser.parse_args(argv)
    tokenizers = {
        "qwen3-tiny (4k)": AutoTokenizer.from_pretrained(ensure_checkpoint("qwen3")),
        "qwen3-20m (8k)": AutoTokenizer.from_pretrained(ensure_checkpoint("qwen3", size="20m")),
    }
    if args.large:
        tokenizers["stdlib-bpe (64k)"] = _large_tokenizer(65536)
    for tok_name, hf in tokenizers.items():
        for cls in (LLGuidance, OutlinesCore, FormatEnforcer):
            try:
                lib, init_s = _timed(lambda c=cls, h=hf: c(h))
            except ImportError:
                print(f"{tok_name:18} {cls.name:20} not installed")
                continue
            print(f"{tok_name:18} {cls.name:20} tokenizer setup {init_s * 1e3:8.1f} ms")
            for schema_name, (schema, instance) in SCHEMAS.items():
                result = bench_one(lib, hf, schema, instance)
                if "mask_us_median" in result:
                    line = (
                        f"compile {result['compile_ms']:9.1f} ms  mask median "
                        f"{result['mask_us_median']:8.1f} us  max {result['mask_us_max']:9.1f} us"
                        f"  ({result['tokens']} tokens)"
                    )
                else:
                    line = result["error"]
                print(f"    {schema_name:18} {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
