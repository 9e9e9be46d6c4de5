"""Check one value against the subset of JSON Schema the field tables use, with the messages of
the typed readers (gateway/schema/readers.py), which do the scalar checks themselves.

Supported: `type` (one or a list; null always passes: it reads as "not set"), `enum`,
`minimum` / `exclusiveMinimum` / `maximum`, `minLength` / `maxLength`, `items`, `minItems` / `maxItems`,
`properties` with `additionalProperties: false` and `required`, `anyOf`. Names in messages are
JSON paths: `stream_options.include_usage`, `input[2]`.
"""

from __future__ import annotations

import math
from typing import Any

from gateway.http.errors import invalid, unknown_field
from gateway.schema import readers as f

_ARTICLE = {"integer": "an integer", "object": "an object", "array": "an array"}


def _kinds(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    return [k for k in kinds if k != "null"]


def _described(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(_described(s) for s in schema["anyOf"] if s.get("type") != "null")
    kinds = _kinds(schema) or ["value"]
    return " or ".join(_ARTICLE.get(k, f"a {k}") for k in kinds)


def matches(value: Any, schema: dict[str, Any]) -> bool:
    try:
        check_value("value", value, schema)
    except Exception:  # an APIError: it does not match
        return False
    return True


def check_value(name: str, value: Any, schema: dict[str, Any], deep: bool = True) -> None:
    """Raise the 400 naming `name` unless `value` matches `schema` (only its outer type when
    not `deep`)."""
    if value is None:
        return
    if "anyOf" in schema:
        if not deep:
            return  # its parser tells the alternatives apart, with its own messages
        if not any(matches(value, alternative) for alternative in schema["anyOf"]):
            raise invalid(name, f"`{name}` must be {_described(schema)}")
        return
    kinds = _kinds(schema)
    if len(kinds) > 1:
        if not any(matches(value, {**schema, "type": kind}) for kind in kinds):
            raise invalid(name, f"`{name}` must be {_described(schema)}")
        return
    kind = kinds[0] if kinds else None
    holder = {name: value}
    if kind == "integer":
        f.integer(holder, name, schema.get("minimum"), schema.get("maximum"))
    elif kind == "number":
        lo_open = "exclusiveMinimum" in schema
        lo = schema.get("exclusiveMinimum" if lo_open else "minimum", -math.inf)
        f.number(holder, name, lo, schema.get("maximum"), lo_open=lo_open)
    elif kind == "string":
        f.string(holder, name)
        if len(value) < schema.get("minLength", 0):
            raise invalid(name, f"`{name}` must be a non-empty string")
        most = schema.get("maxLength")
        if most is not None and len(value) > most:
            raise invalid(name, f"`{name}` is {len(value)} characters, over the {most} allowed")
    elif kind == "boolean":
        f.boolean(holder, name)
    elif kind == "object":
        f.obj(holder, name)
        if deep:
            _check_object(name, value, schema)
    elif kind == "array":
        f.array(holder, name)
        if deep:
            _check_array(name, value, schema)
    if deep and "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(repr(v) for v in schema["enum"] if v is not None)
        raise invalid(name, f"`{name}` must be one of {allowed}, got {value!r}")


def _check_object(name: str, value: dict, schema: dict[str, Any]) -> None:
    properties = schema.get("properties")
    if properties is None:
        return
    for key in value:
        if key not in properties and schema.get("additionalProperties") is False:
            raise unknown_field(f"{name}.{key}")
    for key in schema.get("required", ()):
        if value.get(key) is None:
            raise invalid(f"{name}.{key}", f"`{name}.{key}` is required")
    for key, sub in properties.items():
        if key in value:
            check_value(f"{name}.{key}", value[key], sub)


def _check_array(name: str, value: list, schema: dict[str, Any]) -> None:
    if len(value) < schema.get("minItems", 0):
        raise invalid(name, f"`{name}` must hold at least {schema['minItems']} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        raise invalid(name, f"`{name}` may hold at most {schema['maxItems']} items")
    items = schema.get("items")
    if items is not None:
        for index, item in enumerate(value):
            check_value(f"{name}[{index}]", item, items)
