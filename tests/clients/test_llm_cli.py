"""The `llm` CLI with an extra-openai-models.yaml pointing at the server: a plain, a streamed
and a tool-using call.

`llm` has no tool_choice, so its tool call comes from the model in auto mode: the scripted
model calls `llm_time` (llm's built-in tool) when the request bans <think> (`-o logit_bias`),
and answers once a tool result is in its prompt, so llm's tool chain is one call long."""

from __future__ import annotations

import json

import pytest

from tests.support.clients import client_env, run_client
from worker.tiny_models.scripted import ANSWER, TOOL_NAME

pytestmark = pytest.mark.clients
ALIAS = "vomlx-tiny"


@pytest.fixture(scope="module")
def llm(python_clients, client_server, tmp_path_factory):
    home = tmp_path_factory.mktemp("llm-home")
    user_dir = home / "llm"
    user_dir.mkdir()
    # What docs/clients.md tells a user to write (JSON is YAML).
    models = [
        {
            "model_id": ALIAS,
            "model_name": client_server.model,
            "api_base": f"{client_server.url}/v1",
            "api_key_name": "vomlx",
            "supports_tools": True,
        }
    ]
    (user_dir / "extra-openai-models.yaml").write_text(json.dumps(models, indent=2))
    env = client_env(home, LLM_USER_PATH=str(user_dir))

    def run(*args: str):
        return run_client([python_clients.bin("llm"), *args], env, home, timeout=60)

    keys = run("keys", "set", "vomlx", "--value", client_server.api_key)
    assert keys.returncode == 0, keys.describe()
    return run


def last_logged(llm) -> dict:
    logs = llm("logs", "-n", "1", "--json")
    assert logs.returncode == 0, logs.describe()
    return json.loads(logs.stdout)[0]


def test_plain(llm):
    done = llm("-m", ALIAS, "--no-stream", "Say hello.")
    assert done.returncode == 0, done.describe()
    assert done.stdout.strip() == ANSWER
    assert last_logged(llm)["response_json"]["object"] == "chat.completion"


def test_streamed(llm):
    done = llm("-m", ALIAS, "Say hello.")
    assert done.returncode == 0, done.describe()
    assert done.stdout.strip() == ANSWER
    assert last_logged(llm)["response_json"]["object"] == "chat.completion.chunk"


def test_tool_call(llm, scripted_checkpoint):
    tokenizer = json.loads((scripted_checkpoint / "tokenizer.json").read_text())
    [think] = [t["id"] for t in tokenizer["added_tokens"] if t["content"] == "<think>"]
    bias = json.dumps({str(think): -100})
    done = llm("-m", ALIAS, "-T", TOOL_NAME, "--td", "-o", "logit_bias", bias, "What time is it?")
    assert done.returncode == 0, done.describe()
    assert f"Tool call: {TOOL_NAME}(" in done.stdout + done.stderr, done.describe()
    assert done.stdout.strip().splitlines()[-1] == ANSWER, done.describe()
    logged = last_logged(llm)  # the answer, which carried the tool's result
    assert [r["name"] for r in logged["tool_results"]] == [TOOL_NAME]
