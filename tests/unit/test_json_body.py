"""Malformed JSON bodies are 400s naming the rule they break, never 5xx (gateway/http/json_body.py)."""

from __future__ import annotations

import pytest

from gateway.http.json_body import MAX_DEPTH, BodyError, parse_json
from tests.support.fake_engine import make_client


def test_a_body_nested_deeper_than_the_limit_is_refused():
    with pytest.raises(BodyError, match=f"more than {MAX_DEPTH} levels"):
        parse_json(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))


def test_a_body_nested_to_the_limit_parses():
    assert parse_json(b'{"a":' * (MAX_DEPTH - 1) + b"[]" + b"}" * (MAX_DEPTH - 1))


def test_a_body_nested_past_the_recursion_limit_is_refused_not_crashed():
    with pytest.raises(BodyError, match="levels deep"):
        parse_json(b"[" * 100_000 + b"]" * 100_000)


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_json_number_constants_are_refused(literal):
    with pytest.raises(BodyError, match="not valid JSON"):
        parse_json(b'{"temperature": ' + literal + b"}")


def test_a_float_too_large_for_a_double_is_refused():
    with pytest.raises(BodyError, match="too large"):
        parse_json(b'{"temperature": 1e999}')


def test_large_integers_keep_their_exact_value():
    assert parse_json(b'{"seed": 123456789012345678901234567890}') == {
        "seed": 123456789012345678901234567890
    }


def test_an_integer_of_more_digits_than_python_parses_is_refused():
    with pytest.raises(BodyError):
        parse_json(b'{"seed": ' + b"9" * 5000 + b"}")


def test_a_key_named_twice_is_refused_naming_it():
    with pytest.raises(BodyError, match="'model' twice"):
        parse_json(b'{"model": "a", "messages": [], "model": "b"}')


def test_invalid_utf8_is_refused():
    with pytest.raises(BodyError):
        parse_json(b'{"model": "\xff"}')


DEEP = b"[" * 5000 + b"]" * 5000


@pytest.mark.parametrize(
    "path",
    [
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/messages",
        "/v1/responses",
        "/v1/audio/speech",
    ],
)
@pytest.mark.parametrize(
    "body",
    [DEEP, b'{"model": "tiny", "model": "tiny"}', b'{"n": 1e999}', b"{", b"\xff"],
    ids=["deep", "duplicate", "huge-float", "truncated", "not-utf8"],
)
def test_every_malformed_body_is_a_400_in_the_apis_shape(path, body):
    with make_client() as client:
        response = client.post(path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert "not valid JSON" in error["message"]


def test_a_lone_surrogate_is_refused_naming_its_field():
    with pytest.raises(BodyError, match=r"`messages\[0\]\.content` holds a lone UTF-16") as caught:
        parse_json(b'{"messages": [{"role": "user", "content": "hi \\ud800"}]}')
    assert caught.value.param == "messages[0].content"


def test_a_lone_surrogate_in_a_key_is_refused():
    with pytest.raises(BodyError, match="a key of `metadata` holds a lone UTF-16"):
        parse_json(b'{"metadata": {"\\udfff": 1}}')


def test_a_lone_surrogate_as_raw_bytes_is_refused():
    # json.loads decodes bytes with surrogatepass: ED A0 80 becomes U+D800 unless checked
    with pytest.raises(BodyError, match="`model` holds a lone UTF-16"):
        parse_json(b'{"model": "\xed\xa0\x80"}')


def test_a_surrogate_pair_is_one_character_and_parses():
    assert parse_json(b'{"content": "\\ud83d\\ude00"}') == {"content": "\U0001f600"}


SURROGATE_BODIES = {
    "/v1/chat/completions": (
        {"model": "tiny", "messages": [{"role": "user", "content": "\ud800"}]},
        "messages[0].content",
    ),
    "/v1/completions": ({"model": "tiny", "prompt": ["ok", "\ud800"]}, "prompt[1]"),
    "/v1/messages": (
        {"model": "tiny", "max_tokens": 8, "messages": [{"role": "user", "content": "\ud800"}]},
        "messages[0].content",
    ),
    "/v1/messages/count_tokens": (
        {"model": "tiny", "messages": [{"role": "user", "content": "\udfff"}]},
        "messages[0].content",
    ),
    "/v1/responses": ({"model": "tiny", "input": "\ud800"}, "input"),
    "/tokenize": ({"model": "tiny", "prompt": "\ud800"}, "prompt"),
    "/detokenize": ({"model": "\ud800", "tokens": [1]}, "model"),
    "/v1/embeddings": ({"model": "tiny", "input": "\ud800"}, "input"),
    "/v1/rerank": ({"model": "tiny", "query": "\ud800", "documents": ["a"]}, "query"),
    "/v1/score": ({"model": "tiny", "text_1": "a", "text_2": "\ud800"}, "text_2"),
    "/v1/audio/speech": ({"model": "tts-1", "input": "\ud800", "voice": "alloy"}, "input"),
    "/v1/admin/models/load": ({"model": "\ud800"}, "model"),
}


@pytest.mark.parametrize("path", sorted(SURROGATE_BODIES))
def test_a_lone_surrogate_on_every_json_route_is_a_400_naming_the_field(path):
    import json

    body, param = SURROGATE_BODIES[path]
    raw = json.dumps(body).encode()  # ensure_ascii: the surrogate travels as a \\ud800 escape
    with make_client() as client:
        response = client.post(path, content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert "lone UTF-16 surrogate" in error["message"]
    assert param in error["message"]
    if path != "/v1/messages" and path != "/v1/messages/count_tokens":
        assert error["param"] == param  # OpenAI's shape names it in `param` too
