"""LoRA adapters at run time, against the real gateway and worker: `--lora-modules` at start,
vLLM's `/v1/load_lora_adapter` and `/v1/unload_lora_adapter` (admin key), an adapter reached
by its name as `model`, listed on /v1/models with `parent`; requests of two adapters and of the
base model served in one batch, each equal to `mlx_lm.load(base, adapter_path=...)` called
directly (greedy, token for token); a restarted worker serves them again."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from functools import cache

import anthropic
import httpx
import mlx.core as mx
import pytest
from mlx_lm import load, stream_generate
from mlx_lm.sample_utils import make_sampler

from tests.support import direct
from tests.support.server import model_name, openai_client
from worker.tiny_models.adapter import ensure_lora_adapter

MESSAGES = [{"role": "user", "content": "Name three prime numbers."}]


@pytest.fixture(scope="module")
def adapters(qwen3_path, tmp_path_factory) -> dict[str, str]:
    sql = str(ensure_lora_adapter(qwen3_path))
    # An adapter of a model with wider layers: its lora_a rows do not fit this model's.
    other = tmp_path_factory.mktemp("other-base") / "adapter"
    shutil.copytree(sql, other)
    weights = mx.load(f"{sql}/adapters.safetensors")
    wider = {k: mx.concatenate([v, v]) if k.endswith("lora_a") else v for k, v in weights.items()}
    mx.save_safetensors(str(other / "adapters.safetensors"), wider)
    return {"sql": sql, "poet": str(ensure_lora_adapter(qwen3_path, seed=11)), "other": str(other)}


@pytest.fixture(scope="module")
def server(start_server, qwen3_path, adapters):
    return start_server(
        qwen3_path,
        "--lora-modules", f"sql={adapters['sql']}",
        "--max-loras", "2",
        "--heartbeat-timeout", "10",
        name="lora",
    )  # fmt: skip


@cache
def _model(base: str, adapter: str | None):
    return load(base, adapter_path=adapter)


def expected(base: str, adapter: str | None, max_tokens: int) -> str:
    model, tokenizer = _model(base, adapter)
    prompt = direct.chat_prompt(base, MESSAGES)
    steps = stream_generate(
        model, tokenizer, prompt, max_tokens=max_tokens, sampler=make_sampler(0.0)
    )
    return "".join(step.text for step in steps)


def chat(server, model: str, max_tokens: int = 16, stream: bool = False) -> tuple[str, str]:
    """(text, the model the answer names)."""
    client = openai_client(server)
    args = {"model": model, "messages": MESSAGES, "max_tokens": max_tokens, "temperature": 0}
    if not stream:
        reply = client.chat.completions.create(**args)
        return reply.choices[0].message.content, reply.model
    chunks = list(client.chat.completions.create(stream=True, **args))
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), chunks[0].model


def admin(server, action: str, headers: dict | None = None, **body) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/{action}_lora_adapter",
        json=body,
        headers=server.admin_headers if headers is None else headers,
        timeout=60,
    )


def cards(server) -> dict[str, dict]:
    r = httpx.get(f"{server.url}/v1/models", headers=server.headers, timeout=10)
    r.raise_for_status()
    return {card["id"]: card for card in r.json()["data"]}


def test_a_startup_adapter_is_a_model_whose_parent_is_the_base(server, qwen3_path, adapters):
    models = cards(server)
    base = model_name(qwen3_path)
    assert models["sql"]["parent"] == base and models["sql"]["root"] == adapters["sql"]
    assert models["sql"]["capabilities"] == models[base]["capabilities"]
    assert models[base]["parent"] is None
    text, named = chat(server, "sql")
    assert (text, named) == (expected(qwen3_path, adapters["sql"], 16), "sql")
    assert text != expected(qwen3_path, None, 16)  # the adapter changes the answer


def test_an_adapter_loaded_at_run_time_answers_as_mlx_lm_with_it_streamed_or_not(
    server, qwen3_path, adapters
):
    r = admin(server, "load", lora_name="poet", lora_path=adapters["poet"])
    assert r.status_code == 200, r.text
    assert r.text == "Success: LoRA adapter 'poet' added successfully."
    assert cards(server)["poet"]["parent"] == model_name(qwen3_path)
    want = expected(qwen3_path, adapters["poet"], 16)
    assert chat(server, "poet") == (want, "poet")
    assert chat(server, "poet", stream=True) == (want, "poet")


def test_two_adapters_and_the_base_model_in_one_batch_each_equal_their_direct_run(
    server, qwen3_path, adapters
):
    if "poet" not in cards(server):
        assert (
            admin(server, "load", lora_name="poet", lora_path=adapters["poet"]).status_code == 200
        )
    base = model_name(qwen3_path)
    names = {"sql": adapters["sql"], "poet": adapters["poet"], base: None}
    results: dict[str, tuple[str, str]] = {}
    barrier = threading.Barrier(len(names))

    def run(name: str) -> None:
        barrier.wait()
        results[name] = chat(server, name, 48, stream=True)

    threads = [threading.Thread(target=run, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    for name, path in names.items():
        assert results[name] == (expected(qwen3_path, path, 48), name), name
    stats = httpx.get(f"{server.url}/v1/admin/stats", headers=server.headers, timeout=10).json()
    assert stats["requests_total"] >= 3


def test_an_unloaded_adapter_is_gone_and_may_load_again(server, qwen3_path, adapters):
    if "poet" not in cards(server):
        assert (
            admin(server, "load", lora_name="poet", lora_path=adapters["poet"]).status_code == 200
        )
    r = admin(server, "unload", lora_name="poet")
    assert (r.status_code, r.text) == (200, "Success: LoRA adapter 'poet' removed successfully.")
    assert "poet" not in cards(server)
    r = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={"model": "poet", "messages": MESSAGES, "max_tokens": 4},
        headers=server.headers,
        timeout=30,
    )
    assert r.status_code == 404 and r.json()["error"]["param"] == "model"
    assert admin(server, "load", lora_name="poet", lora_path=adapters["poet"]).status_code == 200
    assert chat(server, "poet")[0] == expected(qwen3_path, adapters["poet"], 16)


def test_load_inplace_replaces_the_adapter_behind_a_name(server, qwen3_path, adapters):
    r = admin(server, "load", lora_name="sql", lora_path=adapters["other"], load_inplace=True)
    assert r.status_code == 400 and "another base model" in r.json()["error"]["message"]
    assert cards(server)["sql"]["root"] == adapters["sql"]  # the old one serves on
    r = admin(server, "load", lora_name="sql", lora_path=adapters["poet"], load_inplace=True)
    assert r.status_code == 200, r.text
    try:
        assert chat(server, "sql")[0] == expected(qwen3_path, adapters["poet"], 16)
        assert cards(server)["sql"]["root"] == adapters["poet"]
    finally:
        r = admin(server, "load", lora_name="sql", lora_path=adapters["sql"], load_inplace=True)
        assert r.status_code == 200, r.text


def test_a_restarted_worker_serves_the_adapters_again(server, qwen3_path, adapters):
    if "poet" not in cards(server):
        assert (
            admin(server, "load", lora_name="poet", lora_path=adapters["poet"]).status_code == 200
        )
    pid = server.worker_pid()
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 120
    while not ((h := server.health()).status_code == 200 and h.json()["worker_pid"] != pid):
        assert time.monotonic() < deadline, "the worker did not come back"
        time.sleep(0.2)
    assert {"sql", "poet"} <= set(cards(server))
    assert chat(server, "poet")[0] == expected(qwen3_path, adapters["poet"], 16)
    assert chat(server, "sql")[0] == expected(qwen3_path, adapters["sql"], 16)


def test_the_adapter_routes_take_the_admin_key_only(server, adapters):
    body = {"lora_name": "x", "lora_path": adapters["poet"]}
    for headers in ({}, server.headers):
        r = httpx.post(f"{server.url}/v1/load_lora_adapter", json=body, headers=headers, timeout=10)
        assert r.status_code == 401, r.text
    r = httpx.post(
        f"{server.url}/v1/unload_lora_adapter", json={"lora_name": "sql"}, headers=server.headers
    )
    assert r.status_code == 401
    assert "sql" in cards(server)


@pytest.mark.parametrize(
    "action, body, status, param, words",
    [
        ("load", {"lora_name": "z"}, 400, "lora_path", "lora_path"),
        (
            "load",
            {"lora_name": "z", "lora_path": "/nowhere"},
            400,
            "lora_path",
            "no adapter_config",
        ),
        ("load", {"lora_name": "sql", "lora_path": "SQL"}, 400, "lora_name", "already been loaded"),
        ("load", {"lora_name": "BASE", "lora_path": "SQL"}, 400, "lora_name", "already names"),
        ("load", {"lora_name": "a b", "lora_path": "SQL"}, 400, "lora_name", "not an adapter name"),
        ("load", {"lora_name": "z", "lora_path": "OTHER"}, 400, "lora_path", "another base model"),
        ("load", {"lora_name": "z", "lora_path": "SQL", "rank": 8}, 400, "rank", "rank"),
        ("unload", {"lora_name": "nope"}, 404, "lora_name", "cannot be found"),
        ("unload", {}, 400, "lora_name", "lora_name"),
    ],
)
def test_bad_adapter_requests_are_refused_naming_the_field(
    server, qwen3_path, adapters, action, body, status, param, words
):
    swap = {"SQL": adapters["sql"], "OTHER": adapters["other"], "BASE": model_name(qwen3_path)}
    body = {k: swap.get(v, v) if isinstance(v, str) else v for k, v in body.items()}
    if "poet" in cards(server):  # room under --max-loras: the refusals are for their reasons
        assert admin(server, "unload", lora_name="poet").status_code == 200
    before = set(cards(server))
    r = admin(server, action, **body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["param"] == param and words in error["message"], error
    assert set(cards(server)) == before


def test_more_than_max_loras_adapters_is_refused(server, adapters):
    if "poet" not in cards(server):
        assert (
            admin(server, "load", lora_name="poet", lora_path=adapters["poet"]).status_code == 200
        )
    r = admin(server, "load", lora_name="third", lora_path=adapters["sql"])
    assert r.status_code == 400 and "--max-loras" in r.json()["error"]["message"], r.text


def test_a_startup_adapter_the_worker_cannot_load_is_said_and_left_out(
    start_server, qwen3_path, adapters
):
    server = start_server(
        qwen3_path, "--lora-modules", f"wide={adapters['other']}", name="lora-bad"
    )
    assert "wide" not in cards(server)
    assert "the LoRA adapter wide" in server.log() and "is not served" in server.log()


def test_the_responses_and_messages_apis_run_under_the_adapter_they_name(
    server, qwen3_path, adapters
):
    want = expected(qwen3_path, adapters["sql"], 16)
    response = openai_client(server).responses.create(
        model="sql", input=MESSAGES[0]["content"], max_output_tokens=16, temperature=0
    )
    assert (response.output_text, response.model) == (want, "sql")
    claude = anthropic.Anthropic(base_url=server.url, api_key=server.api_key, max_retries=0)
    message = claude.messages.create(
        model="sql",
        messages=MESSAGES,
        max_tokens=16,
        extra_body={"temperature": 0.0},  # anthropic 2.x takes sampling fields in the body
    )
    assert (message.content[0].text, message.model) == (want, "sql")
