"""Every parameter the installed anthropic SDK can send to `messages.create`,
`beta.messages.create` and their `count_tokens` is known to the server.

The fields are read from the SDK's own type definitions (TypedDicts), top level and, for the
configuration objects (`thinking`, `tool_choice`, `output_config`, `context_management` edits),
every variant and every key of each: a request carrying one is honoured, accepted, or refused
with a 400 that says it is not supported here (`unsupported_parameter`), never answered as a
field that does not exist (`unknown_parameter`). A new SDK release that adds a field fails
here, not in a user's session. The real SDK also sends a beta request end to end (its `betas`
travel as the `anthropic-beta` header).
"""

from __future__ import annotations

import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin

import anthropic
import pytest
from anthropic.types import message_count_tokens_params as count_params
from anthropic.types import message_create_params as create_params
from anthropic.types.beta import message_count_tokens_params as beta_count_params
from anthropic.types.beta import message_create_params as beta_create_params
from typing_extensions import is_typeddict

from gateway.api.anthropic_messages.requests import parse_count, parse_create
from gateway.http.errors import APIError
from tests.support.fake_engine import FakeEngine, make_client

USER = [{"role": "user", "content": "hi"}]
BASE = {"model": "tiny", "max_tokens": 64, "messages": USER}

# Top-level fields -> how the server treats them (README, "Anthropic Messages").
HONOURED = {
    "model", "messages", "system", "max_tokens", "stop_sequences", "stream", "temperature",
    "top_p", "top_k", "tools", "tool_choice", "thinking", "output_config", "context_management",
}  # fmt: skip
ACCEPTED = {
    "metadata", "service_tier", "cache_control", "diagnostics", "inference_geo", "speed",
    "user_profile_id", "workspace_id", "billing_policy", "fallbacks", "fallback_credit_token",
}  # fmt: skip
REFUSED_UNLESS_EMPTY = {"container", "thread", "compaction", "mcp_servers"}
HEADER = {"betas"}  # the SDK sends it as `anthropic-beta`, never in the body

PARAMS = [
    create_params.MessageCreateParamsBase,
    beta_create_params.MessageCreateParamsBase,
    count_params.MessageCountTokensParams,
    beta_count_params.MessageCountTokensParams,
]


def keys(typed_dict: type) -> set[str]:
    return set(typed_dict.__required_keys__ | typed_dict.__optional_keys__)


def hints(typed_dict: type) -> dict[str, Any]:
    return typing.get_type_hints(typed_dict, include_extras=False)


def test_every_top_level_sdk_field_has_a_policy():
    known = HONOURED | ACCEPTED | REFUSED_UNLESS_EMPTY | HEADER
    for params in PARAMS:
        assert keys(params) - known == set(), f"{params.__module__}: fields without a policy"


def sample(tp: Any, depth: int = 0) -> Any:
    """A small value of an SDK parameter type: required keys only, first variant of a union."""
    origin, args = get_origin(tp), get_args(tp)
    if tp is type(None):
        return None
    if origin is Literal:
        return args[0]
    if origin is Union:
        return sample(next(a for a in args if a is not type(None)), depth)
    if tp is bool:
        return True
    if tp is int:
        return 1
    if tp is float:
        return 0.5
    if tp is str:
        return "x"
    if is_typeddict(tp):
        found = hints(tp)
        return {k: sample(found[k], depth + 1) for k in sorted(tp.__required_keys__)}
    if origin in (list, Iterable, Sequence) or (origin and issubclass(origin, Iterable)):
        if origin and issubclass(origin, Mapping):
            return {}
        return [sample(args[0], depth + 1)] if args and depth < 4 else []
    return {}


def variants(tp: Any) -> list[Any]:
    """The TypedDict variants of a (maybe optional, maybe listed) parameter type."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Union:
        return [v for a in args for v in variants(a)]
    if origin is not None and issubclass(origin, Iterable) and args:
        return variants(args[0])
    return [tp] if is_typeddict(tp) else []


def nested_cases() -> list[tuple[str, type, str | None]]:
    """(field, variant, optional key or None) for every configuration object's variant."""
    found = hints(beta_create_params.MessageCreateParamsBase)
    cases = []
    for field in ("thinking", "tool_choice", "output_config"):
        for variant in variants(found[field]):
            cases.append((field, variant, None))
            cases += [(field, variant, key) for key in sorted(variant.__optional_keys__)]
    edit_type = hints(variants(found["context_management"])[0])["edits"]
    for variant in variants(edit_type):
        cases.append(("context_management", variant, None))
        cases += [("context_management", variant, k) for k in sorted(variant.__optional_keys__)]
    return cases


def _request(field: str, variant: type, key: str | None) -> dict:
    value = sample(variant)
    if key is not None:
        value[key] = sample(hints(variant)[key])
    if field == "context_management":
        value = {"edits": [value]}
    return {**BASE, field: value}


@pytest.mark.parametrize(
    ("field", "variant", "key"),
    nested_cases(),
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_every_variant_and_key_of_the_configuration_objects_is_known(field, variant, key):
    body = _request(field, variant, key)
    if field == "output_config" and key == "format":
        body[field]["format"] = {"type": "json_schema", "schema": {"type": "object"}}
    try:
        parse_create(body)
    except APIError as exc:
        assert exc.status == 400
        assert exc.code != "unknown_parameter", exc.message


def message_cases() -> list[tuple[str, type, str | None]]:
    """(where, variant, optional key or None) for every message variant (user, assistant,
    system) and every content block variant of a user or assistant message."""
    found = hints(beta_create_params.MessageCreateParamsBase)
    messages = variants(found["messages"])
    cases: list[tuple[str, type, str | None]] = []
    for message in messages:
        cases.append(("message", message, None))
        cases += [("message", message, key) for key in sorted(message.__optional_keys__)]
    user = next(m for m in messages if get_args(hints(m)["role"]) == ("user",))
    for block in variants(hints(user)["content"]):
        cases.append(("block", block, None))
        cases += [("block", block, key) for key in sorted(block.__optional_keys__)]
    return cases


def _literal(variant: type, key: str) -> Any:
    return get_args(hints(variant)[key])[0]


def _message_request(where: str, variant: type, key: str | None) -> Any:
    # The SDK's `Required[...]` is lost to `from __future__ import annotations` (every key
    # reads as optional): the discriminating `role` / `type` are set from their Literal.
    if where == "message":
        role = _literal(variant, "role")
        value = {"role": role} if role == "system" else {"role": role, "content": "x"}
    else:
        value = {"type": _literal(variant, "type")}
    if key is not None and key not in ("role", "type"):
        value[key] = sample(hints(variant)[key])
    if where == "block":
        for role in ("user", "assistant"):
            yield {**BASE, "messages": [{"role": role, "content": [value]}, *USER]}
        return
    yield {**BASE, "messages": [value, *USER] if value["role"] != "user" else [value]}


@pytest.mark.parametrize(
    ("where", "variant", "key"),
    message_cases(),
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_every_message_and_content_block_field_of_the_sdk_is_known(where, variant, key):
    """Claude Code 2.1 sends `role: "system"` messages with `output_config` (beta
    per-turn-control): every key the SDK's message types have is honoured, accepted or
    refused by name, never an unknown field."""
    for body in _message_request(where, variant, key):
        try:
            parse_create(body)
        except APIError as exc:
            assert exc.status == 400
            assert exc.code != "unknown_parameter", exc.message


def test_a_system_message_with_only_output_config_adds_nothing_and_clear_at_retires_one():
    turn = {"role": "system", "output_config": {"effort": "medium"}}
    plain = parse_create({**BASE, "messages": [*USER]}).generation.inputs.messages
    with_turn = parse_create({**BASE, "messages": [*USER, turn]}).generation.inputs.messages
    assert with_turn == plain
    note = {"role": "system", "content": "be brief", "clear_at": "next_user_message"}
    # It follows the user turn it is for; a later user turn retires it.
    shown = parse_create({**BASE, "messages": [*USER, note]}).generation.inputs.messages
    retired = parse_create(
        {**BASE, "messages": [*USER, note, {"role": "assistant", "content": "ok"}, *USER]}
    ).generation.inputs.messages
    assert {"role": "system", "content": "be brief"} in shown
    assert all(m.get("content") != "be brief" for m in retired)


@pytest.mark.parametrize("field", sorted(ACCEPTED))
def test_accepted_fields_are_accepted_with_the_sdk_types_values(field):
    value = sample(hints(beta_create_params.MessageCreateParamsBase)[field])
    parse_create({**BASE, field: value})
    if field in keys(beta_count_params.MessageCountTokensParams):
        parse_count({"model": "tiny", "messages": USER, field: value})


@pytest.mark.parametrize("field", sorted(REFUSED_UNLESS_EMPTY))
def test_server_side_features_are_refused_naming_them_unless_empty(field):
    value = sample(hints(beta_create_params.MessageCreateParamsBase)[field])
    empty = [] if isinstance(value, list) else None
    parse_create({**BASE, field: empty})
    with pytest.raises(APIError) as caught:
        parse_create({**BASE, field: value or {"type": "x"}})
    assert (caught.value.status, caught.value.param) == (400, field)
    assert caught.value.code == "unsupported_parameter"


def test_the_sdk_sends_a_beta_request_as_claude_code_does():
    engine = FakeEngine()
    with make_client(engine) as http:
        client = anthropic.Anthropic(
            base_url=str(http.base_url), api_key="k", http_client=http, max_retries=0
        )
        message = client.beta.messages.create(
            model="tiny",
            max_tokens=4096,
            messages=USER,
            betas=["context-management-2025-06-27", "interleaved-thinking-2025-05-14"],
            context_management={"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
            thinking={"type": "adaptive"},
            output_config={"effort": "high"},
            metadata={"user_id": "u"},
            system=[
                {
                    "type": "text",
                    "text": "You are Claude Code.",
                    "cache_control": {"type": "ephemeral"},
                }
            ],  # fmt: skip
        )
    assert message.context_management.applied_edits == []
    assert message.content[0].text == "Hello"


@pytest.mark.parametrize("role", [{}, [], 3, None])
def test_a_role_that_is_not_a_string_is_a_400(role):
    with pytest.raises(APIError) as caught:
        parse_create({**BASE, "messages": [{"role": role, "content": "x", "clear_at": "never"}]})
    assert caught.value.status == 400 and "role" in caught.value.message
