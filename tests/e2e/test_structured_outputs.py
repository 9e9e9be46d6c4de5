"""vLLM's structured outputs beyond JSON (regex, choice, Lark grammar, and JSON by the same
fields), in both spellings, on chat (streamed and not) and completions, through the real server
on the tiny random-weight qwen3: a random model's output obeys the constraint only because the
grammar masks every token. Malformed and conflicting bodies are 400s naming the field."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from tests.support.server import model_name, openai_client

REGEX = r"(yes|no), [0-9]{1,3}"
CHOICES = ["red", "green", "blue"]
GRAMMAR = 'start: "The answer is " ANSWER "."\nANSWER: "yes" | "no"'
SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}
NO_THINKING = {"enable_thinking": False}


def _obeys(kind: str, text: str) -> bool:
    if kind == "regex":
        return re.fullmatch(REGEX, text) is not None
    if kind == "choice":
        return text in CHOICES
    if kind == "grammar":
        return text in ("The answer is yes.", "The answer is no.")
    return isinstance(json.loads(text).get("ok"), bool)


VALUES = {"regex": REGEX, "choice": CHOICES, "grammar": GRAMMAR, "json": SCHEMA}
# (kind, the body fields that ask for it): the current spelling and the older guided_* one.
SPELLINGS = [
    (kind, fields)
    for kind, value in VALUES.items()
    for fields in ({"structured_outputs": {kind: value}}, {f"guided_{kind}": value})
]


def _chat(server, path, fields, stream=False):
    client = openai_client(server)
    create = client.chat.completions.create
    extra = {**fields, "chat_template_kwargs": NO_THINKING}
    kwargs = {
        "model": model_name(path),
        "messages": [{"role": "user", "content": "Answer."}],
        "max_tokens": 40,
        "temperature": 0,
        "extra_body": extra,
    }
    if not stream:
        return create(**kwargs).choices[0]
    chunks = list(create(stream=True, **kwargs))
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


@pytest.mark.parametrize(
    "kind, fields", SPELLINGS, ids=[f"{kind}-{next(iter(f))}" for kind, f in SPELLINGS]
)
def test_chat_output_obeys_the_constraint_streamed_and_not(
    default_server, qwen3_path, kind, fields
):
    choice = _chat(default_server, qwen3_path, fields)
    assert choice.finish_reason == "stop", choice
    assert _obeys(kind, choice.message.content), choice.message.content
    assert _chat(default_server, qwen3_path, fields, stream=True) == choice.message.content


@pytest.mark.parametrize("kind", list(VALUES))
def test_completions_output_obeys_the_constraint(default_server, qwen3_path, kind):
    reply = openai_client(default_server).completions.create(
        model=model_name(qwen3_path),
        prompt="Q: Answer.\nA:",
        max_tokens=40,
        temperature=0,
        extra_body={"structured_outputs": {kind: VALUES[kind]}},
    )
    assert _obeys(kind, reply.choices[0].text), reply.choices[0].text


def test_a_json_schema_given_as_json_text_is_taken(default_server, qwen3_path):
    choice = _chat(default_server, qwen3_path, {"guided_json": json.dumps(SCHEMA)})
    assert _obeys("json", choice.message.content)


@pytest.mark.parametrize(
    "fields, named",
    [
        ({"structured_outputs": {"regex": "(ab"}}, "structured_outputs.regex"),
        ({"guided_grammar": "start: undefined_rule"}, "guided_grammar"),
        ({"guided_grammar": "start: start"}, "guided_grammar"),  # compiles, matches nothing
        ({"guided_json": {"type": "strin"}}, "guided_json"),
        ({"guided_json": "{not json"}, "guided_json"),
        ({"structured_outputs": {"choice": []}}, "structured_outputs.choice"),
        (
            {"structured_outputs": {"whitespace_pattern": " "}},
            "structured_outputs.whitespace_pattern",
        ),
        ({"guided_regex": "a+", "guided_choice": ["a"]}, "guided_choice"),
        ({"structured_outputs": {"regex": "a+", "choice": ["a"]}}, "structured_outputs.choice"),
        ({"guided_regex": "a+", "response_format": {"type": "json_object"}}, "guided_regex"),
    ],
)
def test_a_malformed_or_second_constraint_is_a_400_naming_it(
    default_server, qwen3_path, fields, named
):
    body = {
        "model": model_name(qwen3_path),
        "messages": [{"role": "user", "content": "Answer."}],
        "max_tokens": 8,
        **fields,
    }
    reply = httpx.post(
        f"{default_server.url}/v1/chat/completions",
        json=body,
        headers=default_server.headers,
        timeout=120,
    )
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert named in error["message"] or error.get("param") == named, error
