"""Structured-output constraints (`SamplingParams.constraint`) from the three APIs' spellings.

OpenAI chat: `response_format: {"type": "json_schema", "json_schema": {"name", "schema",
"strict"}}`; the Responses API: `text.format: {"type": "json_schema", "name", "schema",
"strict"}`; Anthropic: `output_config.format: {"type": "json_schema", "schema"}`. All become
`{"type": "json_schema", "schema", "name", "strict"}` or `{"type": "json_object"}`, enforced by
the worker's token-level constrained decoding (the worker answers 400 for a schema it cannot
compile). A JSON Schema without `schema` means "any JSON object".
"""

from __future__ import annotations

from typing import Any

from gateway.http.errors import invalid, unknown_field
from protocol.inputs import Constraint, JsonObject, JsonSchema


def json_schema(
    schema: Any, name: Any, strict: Any, path: str, field: str | None = None
) -> Constraint:
    """The constraint for a JSON Schema; `path` is the object holding it, for errors, and
    `field` the schema's own name there (default `{path}.schema`), which the worker names when
    it cannot compile the schema."""
    if schema is None:
        return JsonObject()
    if not isinstance(schema, dict):
        raise invalid(f"{path}.schema", f"`{path}.schema` must be a JSON Schema object")
    if name is not None and not isinstance(name, str):
        raise invalid(f"{path}.name", f"`{path}.name` must be a string")
    if strict is not None and not isinstance(strict, bool):
        raise invalid(f"{path}.strict", f"`{path}.strict` must be a boolean")
    return JsonSchema(schema, name, strict, field or f"{path}.schema")


def check_keys(value: dict[str, Any], allowed: set[str], path: str) -> None:
    for key in value:
        if key not in allowed:
            raise unknown_field(f"{path}.{key}")


def openai_response_format(value: Any) -> Constraint | None:
    """Chat `response_format` -> constraint; None for plain text."""
    path = "response_format"
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid(path, "`response_format` must be an object")
    kind = value.get("type")
    if kind == "text":
        check_keys(value, {"type"}, path)
        return None
    if kind == "json_object":
        check_keys(value, {"type"}, path)
        return JsonObject()
    if kind == "json_schema":
        check_keys(value, {"type", "json_schema"}, path)
        spec = value.get("json_schema")
        if not isinstance(spec, dict):
            raise invalid(f"{path}.json_schema", "`response_format.json_schema` must be an object")
        inner = f"{path}.json_schema"
        check_keys(spec, {"name", "schema", "strict", "description"}, inner)
        return json_schema(spec.get("schema"), spec.get("name"), spec.get("strict"), inner)
    raise invalid(
        f"{path}.type",
        f"`{path}.type` must be 'text', 'json_object' or 'json_schema', got {kind!r}",
    )
