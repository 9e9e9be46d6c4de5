"""The response schemas of `/tokenize` and `/detokenize` (for /openapi.json)."""

from __future__ import annotations

from gateway.schema.builders import COUNT, INTEGER, STRING, Schema, _all, _array, _doc, _or_null

SCHEMAS: dict[str, Schema] = {
    "TokenizeResponse": _all(
        {
            "count": COUNT,
            "max_model_len": _doc(_or_null(INTEGER), "The model's context length, if known."),
            "tokens": _array(INTEGER),
            "token_strs": _doc(_or_null(_array(STRING)), "With `return_token_strs`."),
        }
    ),
    "DetokenizeResponse": _all({"prompt": STRING}),
}
