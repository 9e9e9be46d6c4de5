"""`POST /v1/embeddings` bodies -> EmbedInputs, or a 400 naming the field (and the input's index).

Honoured: `model`, `input` (a string, an array of strings, an array of token ids, or an array
of token-id arrays), `encoding_format` (`float`, `base64`), `dimensions` (only for a model
trained for shorter vectors: Matryoshka), and vLLM's `truncate_prompt_tokens` (-1: the model's
limit; k >= 1: keep the first k tokens). Accepted with no local meaning: `user`. Anything else
is a 400 naming it. What needs the model (the number of inputs against its limit, the length
of a token-id input, `dimensions`) is checked by `check_for_model` once the model is known;
what needs its tokenizer (the length of a text, the request's token total) by the worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.http.errors import invalid
from gateway.schema import field as s
from gateway.schema.readers import INT64_MAX, integer, string
from gateway.schema.request import RequestSchema
from protocol.inputs import EmbedInputs
from protocol.ready import EmbeddingInfo

ENCODING_FORMATS = ("float", "base64")
TRUNCATE = s.integer(
    "Extension (vLLM): -1 truncates to the model's limit, k >= 1 keeps the first k tokens.", -1
)
EMBEDDING = RequestSchema(
    {
        "model": s.string("The served embedding model's id or an alias.", minLength=1),
        "input": s.structure(
            {
                "anyOf": [
                    {"type": "string", "minLength": 1},
                    {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1},
                    {
                        "type": "array",
                        "items": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                        "minItems": 1,
                    },
                ]
            },
            "A string, strings, token ids, or arrays of token ids.",
        ),
        "encoding_format": s.structure(
            {"type": "string", "enum": list(ENCODING_FORMATS)}, "float (default) or base64."
        ),
        "dimensions": s.integer("Shorter vectors, for a model trained for them (Matryoshka).", 1),
        "user": s.accepted(s.string()),
        "truncate_prompt_tokens": TRUNCATE,
    },
    required=("model", "input"),
)


@dataclass(frozen=True)
class EmbeddingRequest:
    model: str
    inputs: list[str | list[int]]
    encoding_format: str  # "float" or "base64"
    dimensions: int | None
    truncate: int | None  # truncate_prompt_tokens

    def embed_inputs(self) -> EmbedInputs:
        return EmbedInputs(input=self.inputs, dimensions=self.dimensions, truncate=self.truncate)


def parse_embedding(body: dict[str, Any]) -> EmbeddingRequest:
    EMBEDDING.check(body)
    model = string(body, "model")
    assert model is not None  # required by the table
    fmt = string(body, "encoding_format") or "float"
    if fmt not in ENCODING_FORMATS:
        raise invalid(
            "encoding_format", f"`encoding_format` must be one of: {', '.join(ENCODING_FORMATS)}"
        )
    truncate = integer(body, "truncate_prompt_tokens")
    if truncate == 0:
        raise invalid(
            "truncate_prompt_tokens",
            "`truncate_prompt_tokens` must be -1 (the model's limit) or >= 1, got 0",
        )
    return EmbeddingRequest(
        model=model,
        inputs=read_input(body.get("input")),
        encoding_format=fmt,
        dimensions=integer(body, "dimensions"),
        truncate=truncate,
    )


def read_input(value: Any) -> list[str | list[int]]:
    """The inputs in order: each a non-empty string or a non-empty token-id list."""
    if value is None:
        raise invalid("input", "`input` is required: a string, or an array of strings or tokens")
    if isinstance(value, str):
        value = [value]
    elif not isinstance(value, list):
        raise invalid(
            "input", "`input` must be a string, an array of strings, an array of token ids "
            "or an array of token-id arrays"
        )  # fmt: skip
    if not value:
        raise invalid("input", "`input` is empty: send at least one text or token-id array")
    if all(_is_token(t) for t in value):
        return [list(value)]  # one input given as token ids
    out: list[str | list[int]] = []
    for index, item in enumerate(value):
        where = f"input[{index}]"
        if isinstance(item, str):
            if not item:
                raise invalid(where, f"`{where}` is an empty string: there is nothing to embed")
            out.append(item)
        elif isinstance(item, list) and item and all(_is_token(t) for t in item):
            out.append(list(item))
        elif isinstance(item, list) and not item:
            raise invalid(where, f"`{where}` is an empty array: there is nothing to embed")
        else:
            raise invalid(
                where, f"`{where}` must be a string or an array of token ids (integers >= 0)"
            )
    return out


def check_for_model(req: EmbeddingRequest, info: EmbeddingInfo) -> None:
    """The limits the gateway can check before the worker: the number of inputs, token-id
    inputs' lengths, and `dimensions` against what the model was trained for."""
    if len(req.inputs) > info.max_inputs:
        raise invalid(
            "input",
            f"`input` has {len(req.inputs)} inputs; this server takes at most "
            f"{info.max_inputs} per request (--max-embedding-inputs)",
            code="too_many_inputs",
        )
    if req.truncate is None:
        for index, item in enumerate(req.inputs):
            if isinstance(item, list) and len(item) > info.max_input_tokens:
                raise invalid(
                    f"input[{index}]",
                    f"`input[{index}]` is {len(item)} tokens long; this model takes at most "
                    f"{info.max_input_tokens} (or set truncate_prompt_tokens)",
                    code="input_too_long",
                )
    wanted = req.dimensions
    if wanted is None or wanted == info.dimensions:
        return
    if not info.matryoshka:
        raise invalid(
            "dimensions",
            f"`dimensions`: this model makes {info.dimensions}-dimensional vectors and was not "
            "trained for shorter ones (no Matryoshka representation in its config)",
            code="unsupported_parameter",
        )
    allowed = info.matryoshka_dimensions
    if wanted > info.dimensions or (allowed and wanted not in allowed):
        sizes = ", ".join(map(str, allowed)) if allowed else f"1 to {info.dimensions}"
        raise invalid("dimensions", f"`dimensions` {wanted}: this model takes {sizes}")


def _is_token(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT64_MAX
