"""A request's grammar: its constraint (`response_format` json_object / json_schema, or vLLM's
`structured_outputs` regex / choice / Lark grammar) or a forced tool call.

Every way a constraint can be impossible is a 400 that names the field: an unknown
response_format type, a schema llguidance cannot compile (with `strict`, also one using a
keyword it does not implement; without, such keywords are ignored), a regex or a grammar it
cannot compile, a forced call in a tool-call syntax that has no grammar.

An object schema that declares `properties` but says nothing about `additionalProperties` is
generated with the declared properties only (xgrammar's "strict mode", vLLM's default): the
output still validates against the schema as given, and the model cannot wander off into an
endless series of made-up keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from protocol.inputs import Choice, Constraint, Grammar, JsonObject, JsonSchema, Regex
from worker.runtime.errors import bad_request
from worker.text.constraints.llg import (
    LlgKit,
    json_schema_grammar,
    lark_grammar,
    regex_grammar,
)
from worker.text.parsers.bare_json import JSON_FENCE
from worker.text.parsers.families import (
    Function,
    GrammarBuilder,
    call_objects_schema,
    literal,
)

RESPONSE_FORMAT_FIELD = "response_format"


def constraint_grammar(constraint: Constraint) -> tuple[str, str]:
    """(grammar, field to name in errors) for SamplingParams.constraint."""
    if isinstance(constraint, JsonObject):
        return json_schema_grammar({"type": "object"}, lenient=True), RESPONSE_FORMAT_FIELD
    if isinstance(constraint, JsonSchema):
        field = constraint.field or "response_format.json_schema.schema"
        return json_schema_grammar(
            closed_objects(constraint.schema), lenient=not constraint.strict
        ), field
    if isinstance(constraint, Regex):
        return regex_grammar(constraint.pattern), constraint.field
    if isinstance(constraint, Choice):
        alternatives = " | ".join(literal(option) for option in constraint.options)
        return lark_grammar(f"start: {alternatives}"), constraint.field
    assert isinstance(constraint, Grammar)
    return lark_grammar(constraint.lark), constraint.field


def tool_call_grammar(
    tokenizer: Any,
    syntax: tuple[str, GrammarBuilder | None],
    tools: Sequence[Mapping[str, Any]],
    parallel: bool,
) -> str:
    """The grammar of calls to `tools` (OpenAI tool objects) in the model's own syntax:
    `syntax` is (its name, its grammar builder; None when it has none)."""
    name, builder = syntax
    if builder is None:
        raise bad_request(
            f"tool_choice 'required' or a named function cannot be enforced for this model's "
            f"tool-call format ({name}); use tool_choice 'auto'"
        )
    return lark_grammar(builder(_functions(tools), parallel, LlgKit(tokenizer, lenient=True)))


def bare_call_grammar(tokenizer: Any, tools: Sequence[Mapping[str, Any]]) -> str:
    """The grammar of a response that is one call to `tools` written as a bare JSON object
    (`{"name": ..., "arguments": {...}}`, any JSON whitespace), after optional blank text,
    optionally inside one ```json fence, then the end (constraints/bare_calls.py)."""
    kit = LlgKit(tokenizer, lenient=True)
    schema = call_objects_schema(_functions(tools))
    flexible = {"whitespace_flexible": True, "key_separator": ":", "item_separator": ","}
    call = kit.json({**schema, "x-guidance": flexible})
    return lark_grammar(
        "\n".join(
            [
                "start: BLANK (call | fenced)",
                "BLANK: /[ \\t\\r\\n]*/",
                f"fenced: {literal(JSON_FENCE)} /[ \\t]*\\n/ BLANK call /[ \\t\\r\\n]*```/",
                f"call: {call}",
            ]
        )
    )


def _functions(tools: Sequence[Mapping[str, Any]]) -> list[Function]:
    """(name, parameters) of OpenAI tool objects, objects closed (`closed_objects`) and
    lenient unless the function is `strict` (OpenAI's: unsupported keywords are an error)."""
    functions: list[Function] = []
    for tool in tools:
        function = tool["function"]
        parameters = closed_objects(function.get("parameters") or {})
        own = (
            parameters.get("x-guidance")
            if isinstance(parameters.get("x-guidance"), Mapping)
            else {}
        )
        parameters["x-guidance"] = {"lenient": function.get("strict") is not True, **own}
        functions.append((function["name"], parameters))
    return functions


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMAS = (
    "items",
    "additionalItems",
    "additionalProperties",
    "unevaluatedProperties",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
)
_OPEN_KEYWORDS = ("additionalProperties", "patternProperties", "unevaluatedProperties")


def closed_objects(schema: Any) -> Any:
    """A copy of `schema` where objects with declared properties admit no others by default."""
    if not isinstance(schema, Mapping):
        return schema
    result = dict(schema)
    for key in _SCHEMA_MAPS:
        if isinstance(result.get(key), Mapping):
            result[key] = {name: closed_objects(sub) for name, sub in result[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(result.get(key), list):
            result[key] = [closed_objects(sub) for sub in result[key]]
    for key in _SCHEMAS:
        if key in result:
            value = result[key]
            result[key] = (
                [closed_objects(sub) for sub in value]
                if isinstance(value, list)
                else closed_objects(value)
            )
    if "properties" in result and not any(key in result for key in _OPEN_KEYWORDS):
        result["additionalProperties"] = False
    return result
