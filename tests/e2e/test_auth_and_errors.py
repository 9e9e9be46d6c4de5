"""Auth, and 4xx errors in OpenAI's shape that name the problem, from the real server."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.support.server import API_KEY, model_name, openai_client

MESSAGES = [{"role": "user", "content": "hi"}]


def _chat(server, headers: dict, **extra) -> httpx.Response:
    body = {"model": server_model(server), "messages": MESSAGES, "max_tokens": 2, **extra}
    return httpx.post(f"{server.url}/v1/chat/completions", json=body, headers=headers, timeout=60)


def server_model(server) -> str:
    return httpx.get(f"{server.url}/v1/models", headers={"x-api-key": API_KEY}, timeout=10).json()[
        "data"
    ][0]["id"]


def test_missing_or_wrong_key_is_401_in_openai_shape(default_server):
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"x-api-key": "wrong"}):
        r = _chat(default_server, headers)
        assert r.status_code == 401
        assert r.json()["error"]["type"] == "authentication_error"


@pytest.mark.parametrize(
    "headers", [{"Authorization": f"Bearer {API_KEY}"}, {"x-api-key": API_KEY}]
)
def test_either_key_header_is_accepted(default_server, headers):
    assert _chat(default_server, headers).status_code == 200


def test_health_needs_no_key(default_server):
    r = default_server.health()
    assert r.status_code == 200 and r.json()["status"] == "ok"


def test_models_lists_the_served_model(default_server, qwen3_path):
    models = openai_client(default_server).models.list()
    assert [m.id for m in models.data] == [model_name(qwen3_path)]


def test_unknown_model_is_404(default_server):
    with pytest.raises(openai.NotFoundError) as err:
        openai_client(default_server).chat.completions.create(
            model="no-such-model", messages=MESSAGES, max_tokens=2
        )
    assert "no-such-model" in err.value.message


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"frobnicate": True}, "frobnicate"),  # not an OpenAI field at all
        # defined by OpenAI, would change the output, not supported
        ({"prediction": {"type": "content", "content": "x"}}, "prediction"),
        ({"temperature": 3.5}, "temperature"),  # out of range
        ({"max_tokens": 0}, "max_tokens"),
    ],
)
def test_bad_fields_are_400_naming_the_field(default_server, extra, field):
    r = _chat(default_server, default_server.headers, **extra)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["param"] == field
    assert field in error["message"]


def test_fields_without_local_meaning_are_accepted(default_server, qwen3_path):
    reply = openai_client(default_server).chat.completions.create(
        model=model_name(qwen3_path),
        messages=MESSAGES,
        max_tokens=2,
        user="u-1",
        store=False,
        metadata={"k": "v"},
        service_tier="auto",
        prompt_cache_key="conversation-7",
    )
    assert reply.choices[0].finish_reason == "length"


def test_malformed_json_is_400(default_server):
    r = httpx.post(
        f"{default_server.url}/v1/chat/completions",
        content=b"{not json",
        headers={**default_server.headers, "content-type": "application/json"},
        timeout=10,
    )
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_prompt_longer_than_the_context_is_400_and_the_worker_stays(default_server, qwen3_path):
    pid = default_server.worker_pid()
    client = openai_client(default_server)
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model=model_name(qwen3_path), prompt=[5] * 5000, max_tokens=2)
    assert "context" in err.value.message
    assert default_server.worker_pid() == pid
    assert (
        client.completions.create(model=model_name(qwen3_path), prompt="ok", max_tokens=2)
        .choices[0]
        .finish_reason
        == "length"
    )
