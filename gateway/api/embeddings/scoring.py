"""`POST /v1/rerank` and `POST /v1/score` bodies -> ScoreInputs, or a 400 naming the field.

Rerank (the Cohere / Jina shape, as vLLM serves it): `model`, `query` (a string), `documents`
(strings, or objects `{"text": ...}`), `top_n` (>= 1; more than there are documents returns
them all), `return_documents` (default true), `truncate_prompt_tokens` (vLLM's: -1 the model's
limit, k >= 1 each pair's first k tokens); `user` accepted with no local meaning.

Score (vLLM's shape): the two sides as `text_1` / `text_2`, `queries` / `documents`,
`queries` / `items` or `data_1` / `data_2`, each a string or an array of strings: one first
text scores against every second one (1:N), or both sides pair up in order (N:N, same
length); `truncate_prompt_tokens` and `user` as above.

Anything else is a 400 naming it. What needs the model's tokenizer (a pair's length, the
request's token total) is checked by the worker; the number of documents here as well, from
the worker's Ready (ScoreInfo).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.api.embeddings.request import TRUNCATE
from gateway.http.errors import invalid
from gateway.schema import field as s
from gateway.schema.readers import boolean, integer, string
from gateway.schema.request import RequestSchema
from protocol.inputs import ScoreInputs
from protocol.ready import ScoreInfo

# vLLM's names for the two sides of /score, in the order it tries them.
SCORE_SIDES = (("queries", "documents"), ("queries", "items"), ("data_1", "data_2"),
               ("text_1", "text_2"))  # fmt: skip
_COMMON = {
    "model": s.string("The served reranker's id or an alias.", minLength=1),
    "user": s.accepted(s.string()),
    "truncate_prompt_tokens": TRUNCATE,
}
_DOCUMENT = {
    "anyOf": [
        {"type": "string"},
        {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
    ]
}
RERANK = RequestSchema(
    {
        **_COMMON,
        "query": s.string("What the documents are ranked against.", minLength=1),
        "documents": s.structure(
            {"type": "array", "items": _DOCUMENT, "minItems": 1}, "Strings or {text} objects."
        ),
        "top_n": s.integer("Return the n best only (default: all).", 1),
        "return_documents": s.boolean("Echo each document's text (default true)."),
    },
    required=("model", "query", "documents"),
)
_TEXTS = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
SCORE = RequestSchema(
    {
        **_COMMON,
        **{
            name: s.structure(_TEXTS, "One side of the pairs: send one pair of names.")
            for side in SCORE_SIDES
            for name in side
        },
    },
    required=("model",),
)


@dataclass(frozen=True)
class RerankRequest:
    model: str
    query: str
    documents: list[str]
    top_n: int | None  # None: every document
    return_documents: bool
    truncate: int | None

    def score_inputs(self) -> ScoreInputs:
        return ScoreInputs([self.query], self.documents, self.truncate)


@dataclass(frozen=True)
class ScoreRequest:
    model: str
    first: list[str]
    second: list[str]
    names: tuple[str, str]  # the fields the two sides came in (`text_1`, `text_2`, ...)
    truncate: int | None

    def score_inputs(self) -> ScoreInputs:
        return ScoreInputs(self.first, self.second, self.truncate)


def parse_rerank(body: dict[str, Any]) -> RerankRequest:
    RERANK.check(body)
    model = _model(body)
    query = body.get("query")
    if not isinstance(query, str):
        raise invalid("query", "`query` is required: a string")
    if not query:
        raise invalid("query", "`query` is an empty string: there is nothing to rank against")
    documents = body.get("documents")
    if not isinstance(documents, list):
        raise invalid(
            "documents", '`documents` is required: an array of strings or of {"text": ...}'
        )
    if not documents:
        raise invalid("documents", "`documents` is empty: send at least one document")
    texts = [_document(item, index) for index, item in enumerate(documents)]
    returned = boolean(body, "return_documents")
    return RerankRequest(
        model=model,
        query=query,
        documents=texts,
        top_n=integer(body, "top_n"),
        return_documents=True if returned is None else returned,
        truncate=_truncate(body),
    )


def parse_score(body: dict[str, Any]) -> ScoreRequest:
    SCORE.check(body)
    model = _model(body)
    given = [side for side in SCORE_SIDES if side[0] in body and side[1] in body]
    if not given:
        present = [name for side in SCORE_SIDES for name in side if name in body]
        raise invalid(
            present[0] if present else "text_1",
            "`text_1` and `text_2` are required (or `queries` and `documents`): each a string "
            "or an array of strings",
        )
    first_name, second_name = given[0]
    for name in {n for side in SCORE_SIDES for n in side} - {first_name, second_name}:
        if name in body:
            raise invalid(name, f"`{name}` with `{first_name}` / `{second_name}`: send one pair")
    first = _texts(body[first_name], first_name)
    second = _texts(body[second_name], second_name)
    if len(first) not in (1, len(second)):
        raise invalid(
            second_name,
            f"`{first_name}` has {len(first)} texts and `{second_name}` {len(second)}: send "
            f"one `{first_name}` text, or as many as `{second_name}` has",
        )
    return ScoreRequest(model, first, second, (first_name, second_name), _truncate(body))


def check_for_model(documents: int, info: ScoreInfo, field: str = "documents") -> None:
    if documents > info.max_documents:
        raise invalid(
            field,
            f"`{field}` has {documents} documents; this server takes at most "
            f"{info.max_documents} per request (--max-embedding-inputs)",
            code="too_many_inputs",
        )


def _model(body: dict[str, Any]) -> str:
    model = string(body, "model")
    if not model:
        raise invalid("model", "`model` is required")
    string(body, "user")  # accepted: no per-user state here
    return model


def _truncate(body: dict[str, Any]) -> int | None:
    truncate = integer(body, "truncate_prompt_tokens", -1)
    if truncate == 0:
        raise invalid(
            "truncate_prompt_tokens",
            "`truncate_prompt_tokens` must be -1 (the model's limit) or >= 1, got 0",
        )
    return truncate


def _document(item: Any, index: int) -> str:
    where = f"documents[{index}]"
    if isinstance(item, dict):
        for key in item:
            if key != "text":
                raise invalid(
                    f"{where}.{key}", f"`{where}.{key}`: a document object has `text` only"
                )
        item = item.get("text")
        where += ".text"
    if not isinstance(item, str):
        raise invalid(where, f'`{where}` must be a string or an object {{"text": ...}}')
    if not item:
        raise invalid(where, f"`{where}` is an empty string: there is nothing to score")
    return item


def _texts(value: Any, name: str) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise invalid(name, f"`{name}` must be a string or an array of strings")
    if not items:
        raise invalid(name, f"`{name}` is empty: send at least one text")
    for index, item in enumerate(items):
        where = name if isinstance(value, str) else f"{name}[{index}]"
        if not isinstance(item, str):
            raise invalid(where, f"`{where}` must be a string")
        if not item:
            raise invalid(where, f"`{where}` is an empty string: there is nothing to score")
    return list(items)
