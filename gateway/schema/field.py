"""One request field: the JSON Schema of its value, what it does here, and how it is checked.

A request's fields are a table of these (gateway/schema/request.py); the parsers check bodies
against the table and /openapi.json is generated from the same table, so what is documented is
what is enforced. JSON null always reads as "not set" (it never changes the output), so every
field also accepts null; the documented schema says so.

`deep=False` marks a field whose inner structure its parser checks with messages of its own
(chat messages, tools, response formats): its schema describes that structure for clients and
the table checks only the outer type. `check`, when given, replaces the table's check: a
policy ("only these values", "not supported") or a reader with a message of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from gateway.http.errors import unsupported

Check = Callable[[dict, str], Any]
Policy = Literal["honoured", "accepted", "limited", "refused"]

# What the docs say of a field that is not simply honoured.
POLICY_NOTES: dict[str, str] = {
    "accepted": "Accepted; it has no effect here.",
    "limited": "Accepted only at the values that change nothing; others are a 400.",
    "refused": "Not supported by this server: any value but null is a 400 naming it.",
}


@dataclass(frozen=True)
class Field:
    schema: dict[str, Any]
    doc: str = ""
    policy: Policy = "honoured"
    deep: bool = True  # the table checks the whole value against `schema`
    check: Check | None = None

    def described(self, nullable: bool = True) -> dict[str, Any]:
        """The field's documented schema: its own, plus null (unless required), plus its
        description."""
        schema = or_null(self.schema) if nullable else self.schema
        note = POLICY_NOTES.get(self.policy)
        text = " ".join(t for t in (self.doc, note) if t)
        return {**schema, "description": text} if text else schema


def or_null(schema: dict[str, Any]) -> dict[str, Any]:
    if "anyOf" in schema:
        alternatives = schema["anyOf"]
        if {"type": "null"} in alternatives:
            return schema
        return {**schema, "anyOf": [*alternatives, {"type": "null"}]}
    kind = schema.get("type")
    if kind is None or kind == "null":
        return schema
    kinds = kind if isinstance(kind, list) else [kind]
    if "null" in kinds:
        return schema
    out = {**schema, "type": [*kinds, "null"]}
    if "enum" in schema:
        out["enum"] = [*schema["enum"], None]
    return out


# -- builders ------------------------------------------------------------------------------


def string(doc: str = "", enum: tuple[str, ...] | None = None, **extra: Any) -> Field:
    schema: dict[str, Any] = {"type": "string", **extra}
    if enum is not None:
        schema["enum"] = list(enum)
    return Field(schema, doc)


def integer(doc: str = "", lo: int | None = None, hi: int | None = None) -> Field:
    schema: dict[str, Any] = {"type": "integer"}
    if lo is not None:
        schema["minimum"] = lo
    if hi is not None:
        schema["maximum"] = hi
    return Field(schema, doc)


def number(
    doc: str = "", lo: float | None = None, hi: float | None = None, lo_open: bool = False
) -> Field:
    schema: dict[str, Any] = {"type": "number"}
    if lo is not None:
        schema["exclusiveMinimum" if lo_open else "minimum"] = lo
    if hi is not None:
        schema["maximum"] = hi
    return Field(schema, doc)


def boolean(doc: str = "") -> Field:
    return Field({"type": "boolean"}, doc)


def obj(doc: str = "", properties: dict[str, Any] | None = None, **extra: Any) -> Field:
    """An object; with `properties`, only those keys (each checked against its schema)."""
    schema: dict[str, Any] = {"type": "object", **extra}
    if properties is not None:
        schema["properties"] = properties
        schema.setdefault("additionalProperties", False)
    return Field(schema, doc)


def array(doc: str = "", items: dict[str, Any] | None = None, **extra: Any) -> Field:
    schema: dict[str, Any] = {"type": "array", **extra}
    if items is not None:
        schema["items"] = items
    return Field(schema, doc)


def any_of(doc: str, *alternatives: dict[str, Any]) -> Field:
    return Field({"anyOf": list(alternatives)}, doc)


def structure(schema: dict[str, Any], doc: str, check: Check | None = None) -> Field:
    """A field its parser reads in depth (see `deep`); `schema` describes it."""
    return Field(schema, doc, deep=False, check=check)


# -- policies ------------------------------------------------------------------------------


def accepted(field: Field, doc: str = "") -> Field:
    """Type-checked, then dropped: no local meaning."""
    return replace(field, policy="accepted", doc=doc or field.doc)


def limited(field: Field, check: Check, doc: str = "") -> Field:
    """Accepted only at values that change nothing (`check` raises the 400 for the others)."""
    return replace(field, policy="limited", check=check, doc=doc or field.doc)


def never(body: dict, name: str) -> None:
    if body.get(name) is not None:
        raise unsupported(name)


def refused(doc: str = "", check: Check = never, schema: dict | None = None) -> Field:
    """Defined by the API, not supported here: null (or `check`'s no-op values) only."""
    return Field(schema or {"type": "null"}, doc, policy="refused", deep=False, check=check)
