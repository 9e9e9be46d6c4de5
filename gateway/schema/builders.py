"""The small builders the component schemas (gateway/api/*/schemas.py) are written with."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def _ref(name: str) -> Schema:  # for use while COMPONENTS is being built
    return {"$ref": f"#/components/schemas/{name}"}


# -- schema builders -------------------------------------------------------------------------

STRING: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer"}
NUMBER: Schema = {"type": "number"}
BOOLEAN: Schema = {"type": "boolean"}
NULL: Schema = {"type": "null"}
COUNT: Schema = {"type": "integer", "minimum": 0}


def _obj(
    properties: dict[str, Schema], required: list[str] | tuple[str, ...] = (), doc: str = ""
) -> Schema:
    """An object with these properties; `required` lists the ones always present."""
    missing = [name for name in required if name not in properties]
    assert not missing, f"required but not described: {missing}"
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if doc:
        schema["description"] = doc
    return schema


def _all(properties: dict[str, Schema], doc: str = "") -> Schema:
    """An object whose every property is always present."""
    return _obj(properties, list(properties), doc)


def _array(items: Schema, doc: str = "") -> Schema:
    schema: Schema = {"type": "array", "items": items}
    if doc:
        schema["description"] = doc
    return schema


def _const(value: Any, doc: str = "") -> Schema:
    schema: Schema = {"const": value}
    if isinstance(value, str):
        schema["type"] = "string"
    elif isinstance(value, bool):
        schema["type"] = "boolean"
    if doc:
        schema["description"] = doc
    return schema


def _or_null(schema: Schema) -> Schema:
    """`schema`, or null."""
    kind = schema.get("type")
    if isinstance(kind, str) and "$ref" not in schema and "enum" not in schema:
        return {**schema, "type": [kind, "null"]}
    if "enum" in schema and isinstance(kind, str):
        return {**schema, "type": [kind, "null"], "enum": [*schema["enum"], None]}
    return {"anyOf": [schema, NULL]}


def _doc(schema: Schema, text: str) -> Schema:
    return {**schema, "description": text}


def _enum(*values: str, doc: str = "") -> Schema:
    schema: Schema = {"type": "string", "enum": list(values)}
    if doc:
        schema["description"] = doc
    return schema


def _event(kind: str, properties: dict[str, Schema], doc: str = "") -> Schema:
    """A streamed event object: `type` (the kind), plus fields that are always present."""
    return _all({"type": _const(kind), **properties}, doc)
