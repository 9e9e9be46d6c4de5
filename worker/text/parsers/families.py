"""What a tool-call family module provides, and the grammar helpers its forced-call grammar uses.

A family (hermes, qwen3_coder, llama3_json, mistral, deepseek, or one of mlx-lm's parsers) is a
`ToolFormat`: how to parse a response's calls while streaming, and, for families whose syntax
can be written as a grammar, the Lark grammar (llguidance dialect) of "one or more calls to
these functions" that `tool_choice: required` / a named function is enforced with.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from worker.text.parsers.tool_base import CallParser, ToolContext


class GrammarKit(Protocol):
    """Lark fragments that depend on the tokenizer and the JSON compile options."""

    def token(self, marker: str) -> str:
        """A marker: its special token (`<[id]>`) when it is one, else a string literal."""
        ...

    def json(self, schema: Mapping[str, Any]) -> str:
        """An inline JSON-schema nonterminal (`%json{...}`) with the server's JSON layout."""
        ...


_SHAPE_KEYWORDS = ("anyOf", "oneOf", "allOf", "$ref", "enum", "const")

Function = tuple[str, Mapping[str, Any]]  # (name, parameters schema)
GrammarBuilder = Callable[[Sequence[Function], bool, GrammarKit], str]


@dataclass(frozen=True)
class ToolFormat:
    """One tool-call syntax: a streaming parser factory and, if it has one, a call grammar."""

    name: str
    make_parser: Callable[[ToolContext], CallParser]
    grammar: GrammarBuilder | None = None
    # Its parser also reads calls written as a bare JSON object (parsers/bare_json.py), which
    # a response with tools is then held to once it opens with one (constraints/bare_calls.py)
    bare_calls: bool = False


def literal(text: str) -> str:
    """A Lark string literal for `text`."""
    return json.dumps(text, ensure_ascii=False)


def parameters_schema(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """A tool's parameters as a schema that only admits an object (OpenAI allows omitting it)."""
    schema = dict(parameters or {})
    if "type" not in schema and not any(key in schema for key in _SHAPE_KEYWORDS):
        schema["type"] = "object"
    return schema


def call_objects_schema(
    functions: Sequence[Function], name_key: str = "name", args_key: str = "arguments"
) -> dict[str, Any]:
    """Schema of one `{"name": ..., "arguments": {...}}` object calling any of `functions`."""
    variants = [
        {
            "type": "object",
            "properties": {
                name_key: {"const": name},
                args_key: parameters_schema(parameters),
            },
            "required": [name_key, args_key],
            "additionalProperties": False,
        }
        for name, parameters in functions
    ]
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def repeat(item: str, separator: str, parallel: bool) -> str:
    """`item`, or with parallel calls one or more of it joined by `separator` (a literal)."""
    if not parallel:
        return item
    return f"{item} ({separator} {item})*"
