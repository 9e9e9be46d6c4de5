"""Every response carries a request id; error bodies name it, and say nothing internal."""

from __future__ import annotations

from tests.support.fake_engine import FakeEngine, accepted, failure, make_client

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}]}


def test_every_response_carries_a_generated_request_id():
    with make_client() as client:
        ids = [
            client.get("/health").headers["x-request-id"],
            client.post("/v1/chat/completions", json=CHAT).headers["x-request-id"],
            client.get("/v1/no-such-route").headers["x-request-id"],
        ]
    assert all(i.startswith("req_") for i in ids) and len(set(ids)) == 3


def test_a_clients_request_id_is_echoed():
    with make_client() as client:
        response = client.post("/v1/chat/completions", json=CHAT, headers={"x-request-id": "ab-1"})
    assert response.headers["x-request-id"] == "ab-1"


def test_a_request_id_that_is_not_a_short_token_is_replaced():
    with make_client() as client:
        response = client.get("/health", headers={"x-request-id": "a b\tc" + "x" * 200})
    assert response.headers["x-request-id"].startswith("req_")


def test_a_401_names_its_request_id_in_the_header():
    with make_client(api_key="sekrit") as client:
        response = client.get("/v1/models", headers={"x-request-id": "r-401"})
    assert response.status_code == 401 and response.headers["x-request-id"] == "r-401"


def test_a_worker_failure_names_the_request_id_in_the_openai_message():
    engine = FakeEngine([accepted(), failure("internal", "the worker failed this request (X)")])
    with make_client(engine) as client:
        response = client.post("/v1/chat/completions", json=CHAT, headers={"x-request-id": "r-9"})
    assert response.status_code == 500
    assert response.json()["error"] == {
        "message": "the worker failed this request (X) (request id r-9)",
        "type": "server_error",
        "param": None,
        "code": "internal",
    }


def test_an_anthropic_error_body_carries_request_id():
    with make_client() as client:
        response = client.post(
            "/v1/messages",
            json={"model": "nope", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
            headers={"x-request-id": "r-404"},
        )
    assert response.status_code == 404
    assert response.json()["request_id"] == "r-404"


def test_an_unexpected_exception_is_a_short_500_with_the_request_id():
    engine = FakeEngine([RuntimeError("/srv/secret/path.py: something internal")])
    with make_client(engine) as client:
        response = client.post("/v1/chat/completions", json=CHAT, headers={"x-request-id": "r-5"})
    assert response.status_code == 500
    assert response.headers["x-request-id"] == "r-5"
    assert response.json()["error"]["message"] == "Internal server error (request id r-5)"
    assert "/srv/secret" not in response.text
