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
