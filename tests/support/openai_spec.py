"""The vendored official OpenAI OpenAPI document (tests/data/openai-openapi), as validators.

`validate(name, instance)` checks a body or stream event against one of its component schemas
and fails with every violation listed. The document is OpenAPI 3.1 (JSON Schema 2020-12) with
some OpenAPI 3.0 `nullable: true` left in it; those are read as "or null", as 3.0 meant.
`$ref`s resolve inside the document. Formats are not checked (the document uses them as hints).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_PATH = Path(__file__).parents[1] / "data" / "openai-openapi" / "openapi.served.json"
_URI = "urn:openai-openapi"


def _nullable_as_null(node: Any) -> Any:
    if isinstance(node, list):
        return [_nullable_as_null(v) for v in node]
    if not isinstance(node, dict):
        return node
    node = {k: _nullable_as_null(v) for k, v in node.items()}
    if node.pop("nullable", False) is True:
        return {"anyOf": [node, {"type": "null"}]}
    node.pop("nullable", None)
    return node


@cache
def spec() -> dict[str, Any]:
    """The document as read, `nullable` rewritten."""
    return _nullable_as_null(json.loads(SPEC_PATH.read_text()))


@cache
def _registry() -> Registry:
    resource = Resource.from_contents(spec(), default_specification=DRAFT202012)
    return Registry().with_resource(_URI, resource)


@cache
def _validator(name: str) -> jsonschema.Draft202012Validator:
    if name not in spec()["components"]["schemas"]:
        raise KeyError(f"no schema {name!r} in {SPEC_PATH.name}")
    schema = {"$ref": f"{_URI}#/components/schemas/{name}"}
    return jsonschema.Draft202012Validator(schema, registry=_registry())


def errors(name: str, instance: Any) -> list[str]:
    """Every way `instance` breaks schema `name` (empty when it conforms)."""
    found = sorted(_validator(name).iter_errors(instance), key=lambda e: list(e.absolute_path))
    return [_describe(e) for e in found]


def validate(name: str, instance: Any) -> None:
    problems = errors(name, instance)
    assert not problems, f"{name}:\n" + "\n".join(problems) + f"\ninstance: {instance!r:.2000}"


def _describe(error: jsonschema.ValidationError) -> str:
    path = "$" + "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.path)
    # anyOf / oneOf failures: the branch that came closest says the most.
    if error.context:
        best = jsonschema.exceptions.best_match(error.context)
        return f"{path}: {error.message[:200]} (closest: {best.message[:300]})"
    return f"{path}: {error.message[:300]}"


def request_properties(name: str) -> set[str]:
    """The top-level properties of request schema `name`, through its allOf parts."""
    schema = spec()["components"]["schemas"][name]
    found = set(schema.get("properties", {}))
    for part in schema.get("allOf", []):
        if "$ref" in part:
            found |= request_properties(part["$ref"].rsplit("/", 1)[-1])
        found |= set(part.get("properties", {}))
    return found


def sse_events(text: str) -> list[tuple[str | None, Any]]:
    """(event name or None, parsed data) of every SSE event in `text`; `[DONE]` stays a string."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        if data:
            joined = "\n".join(data)
            events.append((name, joined if joined == "[DONE]" else json.loads(joined)))
    return events
