"""vLLM's structured outputs on chat and completions: `structured_outputs: {json | regex | choice
| grammar | json_object}` and the older top-level `guided_json`, `guided_regex`, `guided_choice`,
`guided_grammar`.

Each becomes a `SamplingParams.constraint` enforced by the worker's llguidance matcher: a
regex for the whole output (Rust regex syntax), one of the choices exactly, or a sentence of a
Lark grammar (llguidance's dialect). One constraint per request: a second spelling, or one
together with a JSON `response_format`, is a 400 naming it. A pattern or grammar that cannot be
compiled is a 400 from the worker naming the field as sent (`structured_outputs.regex`,
`guided_grammar`, ...). `guided_decoding_backend` chooses vLLM's backend; here llguidance is the
only one, so it is accepted and has no effect. Everything else vLLM's structured-output
parameters hold (whitespace patterns, structural tags, ...) is refused by name.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.generation.structured import json_schema
from gateway.http.errors import invalid, unknown_field
from gateway.schema import field as s
from gateway.schema.field import Field
from protocol.inputs import Choice, Constraint, Grammar, JsonObject, Regex

MAX_CHOICES = 1024
_KINDS = ("json", "regex", "choice", "grammar", "json_object")
_SCHEMA: dict[str, dict[str, Any]] = {
    "json": {"anyOf": [{"type": "object"}, {"type": "string"}]},
    "regex": {"type": "string", "minLength": 1},
    "choice": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    "grammar": {"type": "string", "minLength": 1},
    "json_object": {"type": "boolean"},
}
_GUIDED = {f"guided_{kind}": kind for kind in ("json", "regex", "choice", "grammar")}


def _check(body: dict, name: str) -> None:
    """The field table's check of one field: its own constraints read (400 when malformed)."""
    _field_constraints(body, name)


# The fields, for the chat and completions tables (and /openapi.json).
FIELDS: dict[str, Field] = {
    "structured_outputs": s.structure(
        {"type": "object", "properties": _SCHEMA, "additionalProperties": False},
        "Extension (vLLM): one of json (a JSON Schema), regex (the whole output matches it), "
        "choice (exactly one of the strings), grammar (Lark, llguidance's dialect), "
        "json_object: true.",
        _check,
    ),
    **{
        name: s.structure(_SCHEMA[kind], f"Extension (vLLM): as structured_outputs.{kind}.", _check)
        for name, kind in _GUIDED.items()
    },
    "guided_decoding_backend": s.accepted(s.string(), "llguidance is the only backend."),
}


def constraints(body: dict) -> list[tuple[str, Constraint]]:
    """Every constraint the body's vLLM fields ask for, with the field that gave it (a 400
    naming a malformed one)."""
    return [
        found
        for name in ("structured_outputs", *_GUIDED)
        for found in _field_constraints(body, name)
    ]


def _field_constraints(body: dict, name: str) -> list[tuple[str, Constraint]]:
    """The constraints field `name` of the body asks for (none when it is absent)."""
    value = body.get(name)
    if value is None:
        return []
    if name in _GUIDED:
        return [(name, _constraint(_GUIDED[name], value, name))]
    if not isinstance(value, dict):
        raise invalid(name, f"`{name}` must be an object")
    for key in value:
        if key not in _KINDS:
            raise unknown_field(f"{name}.{key}")
    kinds = [kind for kind in _KINDS if value.get(kind) not in (None, False)]
    return [(f"{name}.{kind}", _constraint(kind, value[kind], f"{name}.{kind}")) for kind in kinds]


def vllm_constraint(body: dict, response_format: Constraint | None) -> Constraint | None:
    """The request's one constraint: `response_format`'s or a vLLM field's (else None)."""
    found = constraints(body)
    if len(found) > 1 or (found and response_format is not None):
        second = found[-1][0] if len(found) > 1 else found[0][0]
        raise invalid(
            second,
            f"`{second}`: a request takes one output constraint "
            "(response_format, structured_outputs or a guided_* field), not several",
        )
    return found[0][1] if found else response_format


def _constraint(kind: str, value: Any, path: str) -> Constraint:
    if kind == "json":
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                message = f"`{path}` must be a JSON Schema (an object or its JSON text)"
                raise invalid(path, message) from None
        if not isinstance(value, dict):
            raise invalid(path, f"`{path}` must be a JSON Schema object")
        return json_schema(value, None, None, path, field=path)
    if kind == "json_object":
        if value is not True:
            raise invalid(path, f"`{path}` must be true")
        return JsonObject()
    if kind == "choice":
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise invalid(path, f"`{path}` must be a non-empty array of strings")
        if len(value) > MAX_CHOICES:
            raise invalid(path, f"`{path}` holds at most {MAX_CHOICES} choices")
        return Choice(list(value), path)
    if not isinstance(value, str) or not value:
        raise invalid(path, f"`{path}` must be a non-empty string")
    return Regex(value, path) if kind == "regex" else Grammar(value, path)
