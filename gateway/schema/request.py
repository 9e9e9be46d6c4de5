"""A request body's schema: its field table, checked on every request and shown in /openapi.json.

`check(body)` is the first thing a parser does: a field not in the table is a 400 naming it, a
required field missing is a 400, and each present field is checked against its schema (or by
its own `check`). The parser then reads the values and checks what a schema cannot say (one
field against another, what the model supports). `json_schema()` is the same table as JSON
Schema, with each field's documentation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.http.errors import invalid, unknown_field
from gateway.schema.field import Field
from gateway.schema.validate import check_value


class RequestSchema:
    def __init__(
        self, fields: Mapping[str, Field], required: tuple[str, ...] = (), doc: str = ""
    ) -> None:
        missing = [name for name in required if name not in fields]
        if missing:
            raise ValueError(f"required fields not in the table: {missing}")
        self.fields = dict(fields)
        self.required = required
        self.doc = doc

    def __contains__(self, name: object) -> bool:
        return name in self.fields

    def check(self, body: dict) -> None:
        for name in body:
            if name not in self.fields:
                raise unknown_field(name)
        for name in self.required:
            if body.get(name) is None:
                raise invalid(name, f"`{name}` is required")
        for name, value in body.items():
            field = self.fields[name]
            if field.check is not None:
                field.check(body, name)
            else:
                check_value(name, value, field.schema, field.deep)

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                name: field.described(nullable=name not in self.required)
                for name, field in self.fields.items()
            },
            "additionalProperties": False,
        }
        if self.required:
            schema["required"] = list(self.required)
        if self.doc:
            schema["description"] = self.doc
        return schema
