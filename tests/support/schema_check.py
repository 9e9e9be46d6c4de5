"""JSON-schema validation for the constraint tests: `jsonschema` when installed, else a small one.

The small validator covers the keywords the tests' schemas use (type, properties, required,
additionalProperties, items, min/maxItems, enum, const, anyOf, $ref into $defs, minimum,
maximum, min/maxLength, pattern, format date / date-time / uuid / email). It is strict: an
unknown keyword fails the check rather than passing silently.
"""

from __future__ import annotations

import re
from typing import Any

try:  # pragma: no cover - depends on the environment
    import jsonschema
except ImportError:  # pragma: no cover
    jsonschema = None

_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}
_FORMATS = {
    "date": r"\d{4}-\d{2}-\d{2}",
    "date-time": r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "email": r"[^@\s]+@[^@\s]+",
}
_KNOWN = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "description",
    "title",
}


def validate(instance: Any, schema: dict) -> None:
    """Raises AssertionError when `instance` does not satisfy `schema`."""
    if jsonschema is not None:
        jsonschema.validate(instance, schema)
    _check(instance, schema, schema, "$")


def _check(value: Any, schema: dict, root: dict, path: str) -> None:
    unknown = set(schema) - _KNOWN
    assert not unknown, f"schema_check does not know {unknown}"
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        _check(value, root["$defs"][name], root, path)
    if "anyOf" in schema:
        errors = []
        for option in schema["anyOf"]:
            try:
                _check(value, option, root, path)
                break
            except AssertionError as exc:
                errors.append(str(exc))
        else:
            raise AssertionError(f"{path}: no anyOf option matches: {errors}")
    if "const" in schema:
        assert value == schema["const"], f"{path}: {value!r} != const"
    if "enum" in schema:
        assert value in schema["enum"], f"{path}: {value!r} not in enum"
    kind = schema.get("type")
    if kind is not None:
        _check_type(value, kind, path)
    if isinstance(value, dict):
        _check_object(value, schema, root, path)
    if isinstance(value, list):
        assert len(value) >= schema.get("minItems", 0), f"{path}: too few items"
        assert len(value) <= schema.get("maxItems", len(value)), f"{path}: too many items"
        for i, item in enumerate(value):
            if "items" in schema:
                _check(item, schema["items"], root, f"{path}[{i}]")
    if isinstance(value, str):
        assert len(value) >= schema.get("minLength", 0), f"{path}: too short"
        assert len(value) <= schema.get("maxLength", len(value)), f"{path}: too long"
        if "pattern" in schema:
            assert re.search(schema["pattern"], value), f"{path}: {value!r} !~ pattern"
        if schema.get("format") in _FORMATS:
            assert re.fullmatch(_FORMATS[schema["format"]], value), f"{path}: bad format"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        assert value >= schema.get("minimum", value), f"{path}: below minimum"
        assert value <= schema.get("maximum", value), f"{path}: above maximum"


def _check_type(value: Any, kind: str, path: str) -> None:
    if kind == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "number":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    else:
        ok = isinstance(value, _TYPES[kind])
    assert ok, f"{path}: {value!r} is not {kind}"


def _check_object(value: dict, schema: dict, root: dict, path: str) -> None:
    properties = schema.get("properties", {})
    for name in schema.get("required", []):
        assert name in value, f"{path}: missing {name!r}"
    for name, item in value.items():
        if name in properties:
            _check(item, properties[name], root, f"{path}.{name}")
        elif schema.get("additionalProperties") is False:
            raise AssertionError(f"{path}: unexpected property {name!r}")
