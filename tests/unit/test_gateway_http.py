"""The gateway's HTTP surface over a fake engine: auth, errors, response shapes, models, admin."""

from __future__ import annotations

import pytest

from gateway.workers.errors import SwapFailed
from tests.support.fake_engine import (
    FakeEngine,
    accepted,
    failure,
    fake_checkpoint,
    finish,
    make_client,
    text,
)

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def client(engine):
    with make_client(engine) as client:
        yield client


def error_of(response) -> dict:
    return response.json()["error"]


# -- auth ----------------------------------------------------------------------------------


@pytest.fixture
def locked(engine):
    with make_client(engine, api_key="sekrit") as client:
        yield client


def test_missing_api_key_is_401(locked):
    response = locked.post("/v1/chat/completions", json=CHAT)
    assert response.status_code == 401
    assert error_of(response)["type"] == "authentication_error"
    assert error_of(response)["code"] == "invalid_api_key"


def test_wrong_api_key_is_401(locked):
    response = locked.get("/v1/models", headers={"Authorization": "Bearer nope"})
    assert response.status_code == 401


def test_bearer_api_key_is_accepted(locked):
    response = locked.post(
        "/v1/chat/completions", json=CHAT, headers={"Authorization": "Bearer sekrit"}
    )
    assert response.status_code == 200


def test_x_api_key_header_is_accepted(locked):
    assert locked.get("/v1/models", headers={"x-api-key": "sekrit"}).status_code == 200


def test_health_needs_no_api_key(locked):
    assert locked.get("/health").status_code == 200


def test_admin_routes_need_the_api_key(locked):
    assert locked.get("/v1/admin/stats").status_code == 401


# -- request errors ------------------------------------------------------------------------


def test_unknown_model_is_404_model_not_found(client):
    response = client.post("/v1/chat/completions", json={**CHAT, "model": "gpt-4o"})
    assert response.status_code == 404
    assert error_of(response)["code"] == "model_not_found"
    assert error_of(response)["param"] == "model"


def test_model_may_be_addressed_by_its_path(client):
    response = client.post("/v1/chat/completions", json={**CHAT, "model": "/models/tiny"})
    assert response.status_code == 200


def test_oversized_body_is_413(engine):
    with make_client(engine, max_body_bytes=100) as client:
        response = client.post("/v1/chat/completions", json={**CHAT, "user": "x" * 200})
    assert response.status_code == 413
    assert engine.requests == []


def test_malformed_json_is_400(client):
    response = client.post(
        "/v1/chat/completions", content=b'{"model": ', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert error_of(response)["type"] == "invalid_request_error"


def test_nan_is_rejected_as_invalid_json(client):
    body = b'{"model": "tiny", "messages": [{"role": "user", "content": "x"}], "temperature": NaN}'
    assert client.post("/v1/chat/completions", content=body).status_code == 400


def test_a_json_array_body_is_400(client):
    assert client.post("/v1/chat/completions", json=[1]).status_code == 400


def test_validation_error_names_the_field_in_openai_shape(client):
    response = client.post("/v1/chat/completions", json={**CHAT, "top_p": 2})
    assert response.status_code == 400
    error = error_of(response)
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == "top_p"


def test_unknown_route_is_404_in_openai_shape(client):
    response = client.get("/v1/nothing")
    assert response.status_code == 404
    assert "message" in error_of(response)


def test_worker_bad_request_error_is_400(engine, client):
    engine.script = [accepted(), failure("bad_request", "prompt too long")]
    response = client.post("/v1/chat/completions", json=CHAT)
    assert response.status_code == 400
    assert error_of(response)["message"] == "prompt too long"


def test_worker_internal_error_is_500(engine, client):
    engine.script = [accepted(), failure("internal", "a bug")]
    response = client.post("/v1/chat/completions", json=CHAT)
    assert response.status_code == 500
    assert error_of(response)["code"] == "internal"


def test_a_request_whose_worker_died_is_a_503_to_retry(engine, client):
    engine.script = [accepted(), text("x"), failure("worker_died", "gone")]
    response = client.post("/v1/chat/completions", json=CHAT)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "2"
    assert error_of(response)["code"] == "worker_died"


def test_aborted_request_is_503(engine, client):
    engine.script = [accepted(), text("x"), finish("abort")]
    response = client.post("/v1/chat/completions", json=CHAT)
    assert response.status_code == 503
    assert error_of(response)["code"] == "aborted"


# -- response shapes -----------------------------------------------------------------------


def test_chat_completion_response_shape(engine, client):
    body = client.post("/v1/chat/completions", json=CHAT).json()
    assert body["id"].startswith("chatcmpl-")
    assert body["object"] == "chat.completion"
    assert body["model"] == "tiny"
    assert isinstance(body["created"], int)
    choice = body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Hello", "refusal": None}
    assert choice["logprobs"] is None
    assert choice["finish_reason"] == "stop"
    assert body["usage"] == {
        "prompt_tokens": 5,
        "completion_tokens": 2,
        "total_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def test_chat_request_reaches_the_engine_as_op_chat(engine, client):
    client.post("/v1/chat/completions", json={**CHAT, "temperature": 0.3})
    request = engine.last
    assert request.op == "chat"
    assert request.inputs.messages == [{"role": "user", "content": "hi"}]
    assert request.sampling.temperature == 0.3
    assert request.stream is False


def test_text_completion_response_shape(engine, client):
    response = client.post("/v1/completions", json={"model": "tiny", "prompt": [1, 2]})
    body = response.json()
    assert body["id"].startswith("cmpl-")
    assert body["object"] == "text_completion"
    assert body["choices"][0]["text"] == "Hello"
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["total_tokens"] == 7
    assert engine.last.op == "complete"
    assert engine.last.inputs.prompt == [1, 2]


def test_two_prompts_are_400_naming_prompt(client):
    response = client.post("/v1/completions", json={"model": "tiny", "prompt": ["a", "b"]})
    assert response.status_code == 400
    assert error_of(response)["param"] == "prompt"


# -- models, health, lifespan --------------------------------------------------------------


def test_models_lists_the_served_model(client):
    body = client.get("/v1/models").json()
    assert body["object"] == "list"
    (card,) = body["data"]
    assert card["id"] == "tiny"
    assert card["object"] == "model"
    assert card["owned_by"]
    assert isinstance(card["created"], int)


def test_models_report_the_engine_state_during_a_swap(engine, client):
    engine.state = "swapping"
    assert client.get("/v1/models").json()["data"][0]["state"] == "swapping"


def test_get_model_by_id(client):
    assert client.get("/v1/models/tiny").json()["id"] == "tiny"


def test_get_other_model_is_404(client):
    response = client.get("/v1/models/other")
    assert response.status_code == 404
    assert error_of(response)["code"] == "model_not_found"


def test_health_reports_the_engine_verdict(engine, client):
    assert client.get("/health").json()["status"] == "ok"
    engine.state, engine.reason = "starting", "loading"
    response = client.get("/health")
    assert response.status_code == 503
    assert response.json()["status"] == "starting"


def test_engine_starts_and_stops_with_the_app(engine):
    with make_client(engine):
        assert engine.started and not engine.stopped
    assert engine.stopped


# -- admin ---------------------------------------------------------------------------------


def test_admin_load_swaps_to_a_local_directory(engine, client, tmp_path):
    model_dir = fake_checkpoint(tmp_path / "other-model")
    response = client.post("/v1/admin/models/load", json={"model": str(model_dir)})
    assert response.status_code == 200
    assert engine.swaps == [(str(model_dir), "other-model")]
    assert response.json()["id"] == "other-model"


def test_admin_load_passes_the_served_model_name(engine, client, tmp_path):
    fake_checkpoint(tmp_path)
    client.post("/v1/admin/models/load", json={"model": str(tmp_path), "served_model_name": "m"})
    assert engine.swaps == [(str(tmp_path), "m")]


def test_admin_load_of_a_missing_directory_is_400(engine, client):
    response = client.post("/v1/admin/models/load", json={"model": "/does/not/exist"})
    assert response.status_code == 400
    assert error_of(response)["param"] == "model"
    assert engine.swaps == []


@pytest.mark.parametrize("model", ["/etc", "/proc/self", "../..", "/does/not/exist", "empty"])
def test_admin_load_of_anything_but_a_checkpoint_is_the_same_400_before_any_swap(
    engine, client, tmp_path, model
):
    """An existing directory and a missing one get the same words, at once: the old 502 after
    a drain told a caller which host directories exist (and cost a 4 s outage)."""
    if model == "empty":
        (tmp_path / "empty").mkdir()
        model = str(tmp_path / "empty")
    response = client.post("/v1/admin/models/load", json={"model": model})
    assert response.status_code == 400
    error = error_of(response)
    assert error["param"] == "model" and error["code"] == "model_not_found"
    assert error["message"] == (
        f"`{model}` is not a model checkpoint this server can load (a directory with a "
        "config.json and *.safetensors weights, or a hub repo id)"
    )
    assert engine.swaps == []


def test_admin_load_outside_the_model_root_is_refused(tmp_path):
    engine = FakeEngine()
    inside, outside = fake_checkpoint(tmp_path / "root" / "m"), fake_checkpoint(tmp_path / "x")
    with make_client(engine, model_root=str(tmp_path / "root")) as client:
        refused = client.post("/v1/admin/models/load", json={"model": str(outside)})
        escaped = client.post("/v1/admin/models/load", json={"model": f"{inside}/../../x"})
        loaded = client.post("/v1/admin/models/load", json={"model": str(inside)})
    assert refused.status_code == escaped.status_code == 400
    assert loaded.status_code == 200 and engine.swaps == [(str(inside), "m")]


ADMIN = {"Authorization": "Bearer boss"}
USER = {"Authorization": "Bearer user"}


def test_the_admin_key_alone_opens_the_model_routes(tmp_path):
    engine = FakeEngine()
    fake_checkpoint(tmp_path)
    load = {"model": str(tmp_path)}
    with make_client(engine, api_key="user", admin_key="boss") as client:
        api = client.post("/v1/chat/completions", json=CHAT, headers=ADMIN)
        as_user = client.post("/v1/admin/models/load", json=load, headers=USER)
        as_nobody = client.post("/v1/admin/models/load", json=load)
        as_admin = client.post("/v1/admin/models/load", json=load, headers=ADMIN)
        stats = [client.get("/v1/admin/stats", headers=h).status_code for h in (USER, ADMIN)]
    assert as_user.status_code == as_nobody.status_code == 401
    assert as_admin.status_code == 200 and len(engine.swaps) == 1
    assert stats == [200, 200] and api.status_code == 200


def test_with_an_api_key_and_no_admin_key_the_model_routes_are_closed(tmp_path):
    fake_checkpoint(tmp_path)
    with make_client(api_key="user") as client:
        response = client.post("/v1/admin/models/load", json={"model": str(tmp_path)}, headers=USER)
    assert response.status_code == 403
    assert "--admin-key" in error_of(response)["message"]


def test_admin_load_failure_is_502(engine, client, tmp_path):
    fake_checkpoint(tmp_path)
    engine.swap_error = SwapFailed("weights missing", restored=True)
    response = client.post("/v1/admin/models/load", json={"model": str(tmp_path)})
    assert response.status_code == 502
    assert "weights missing" in error_of(response)["message"]


def test_admin_stats_returns_the_worker_stats(client):
    assert client.get("/v1/admin/stats").json() == {"active": 0, "waiting": 0}


def test_keyless_health_says_only_the_state_and_the_key_adds_the_details():
    with make_client(api_key="k") as client:
        keyless = client.get("/health")
        keyed = client.get("/health", headers={"Authorization": "Bearer k"})
    assert keyless.json() == {"status": keyless.json()["status"]}
    assert keyed.status_code == keyless.status_code
    assert keyed.json()["status"] == keyless.json()["status"] and len(keyed.json()) > 1


def test_keyless_root_leaves_out_the_version_and_the_models():
    with make_client(api_key="k") as client:
        keyless = client.get("/").json()
        keyed = client.get("/", headers={"x-api-key": "k"}).json()
    assert "version" not in keyless and "models" not in keyless
    assert "version" in keyed and "models" in keyed
