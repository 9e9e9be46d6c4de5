"""Request field tables: what they check, with which messages, and what they document."""

from __future__ import annotations

import pytest

from gateway.api.chat_completions.surface import COMPLETION
from gateway.generation.chat_body import CHAT
from gateway.http.errors import APIError
from gateway.openapi.document import request_schemas
from gateway.schema import field as s
from gateway.schema.request import RequestSchema

TABLE = RequestSchema(
    {
        "model": s.string("", minLength=1),
        "n": s.integer("", 1, 4),
        "temperature": s.number("", 0, 2),
        "top_p": s.number("", 0, 1, lo_open=True),
        "mode": s.string("", ("a", "b")),
        "options": s.obj("", {"flag": {"type": "boolean"}}),
        "items": s.array("", {"type": "string"}, maxItems=2),
        "note": s.accepted(s.string()),
        "legacy": s.refused("Old."),
    },
    required=("model",),
)


def _error(body: dict) -> APIError:
    with pytest.raises(APIError) as caught:
        TABLE.check(body)
    assert caught.value.status == 400
    return caught.value


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ({}, "model", "`model` is required"),
        ({"model": "m", "x": 1}, "x", "Unknown field `x`"),
        ({"model": ""}, "model", "`model` must be a non-empty string"),
        ({"model": "m", "n": 5}, "n", "`n` must be >= 1 and <= 4, got 5"),
        ({"model": "m", "n": 1.5}, "n", "`n` must be an integer, got number"),
        ({"model": "m", "temperature": "hot"}, "temperature", "must be a number, got string"),
        ({"model": "m", "top_p": 0}, "top_p", "`top_p` must be > 0 and <= 1, got 0"),
        ({"model": "m", "mode": "c"}, "mode", "`mode` must be one of 'a', 'b', got 'c'"),
        ({"model": "m", "options": {"flag": 1}}, "options.flag", "must be a boolean"),
        ({"model": "m", "options": {"other": 1}}, "options.other", "Unknown field"),
        ({"model": "m", "items": ["a", 2]}, "items[1]", "`items[1]` must be a string"),
        ({"model": "m", "items": ["a", "b", "c"]}, "items", "at most 2 items"),
        ({"model": "m", "note": 3}, "note", "`note` must be a string"),
        ({"model": "m", "legacy": True}, "legacy", "is not supported by this server"),
    ],
)
def test_the_table_refuses_with_a_400_naming_the_field(body, param, message):
    error = _error(body)
    assert error.param == param and message in error.message


def test_null_reads_as_not_set_and_values_in_range_pass():
    TABLE.check({"model": "m", "n": None, "temperature": 2, "top_p": 1, "legacy": None})
    TABLE.check({"model": "m", "n": 4.0, "mode": "b", "options": {"flag": True}, "note": "x"})


def test_the_documented_schema_is_the_table():
    schema = TABLE.json_schema()
    assert schema["required"] == ["model"] and schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(TABLE.fields)
    props = schema["properties"]
    assert props["model"]["type"] == "string"  # required: not nullable
    assert props["n"] == {"type": ["integer", "null"], "minimum": 1, "maximum": 4}
    assert props["top_p"]["exclusiveMinimum"] == 0
    assert props["mode"]["enum"] == ["a", "b", None]
    assert props["legacy"]["type"] == "null" and "Not supported" in props["legacy"]["description"]
    assert "no effect" in props["note"]["description"]


@pytest.mark.parametrize("table", [CHAT, COMPLETION], ids=["chat", "completion"])
def test_every_documented_field_is_accepted_as_null_and_nothing_else_is(table):
    body = {name: None for name in table.fields}
    body.update({name: "m" if name == "model" else [1] for name in table.required})
    if table is CHAT:
        body["messages"] = [{"role": "user", "content": "hi"}]
    table.check(body)
    with pytest.raises(APIError):
        table.check({**body, "not_a_field": None})


def test_every_request_body_in_the_document_comes_from_a_table():
    schemas = request_schemas()
    assert schemas["ChatCompletionRequest"] == CHAT.json_schema()
    assert all("properties" in schema or "anyOf" in schema for schema in schemas.values()), list(
        schemas
    )
