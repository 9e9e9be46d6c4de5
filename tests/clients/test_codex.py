"""OpenAI Codex CLI (`codex exec`, Responses API) completes a turn through a custom model
provider pointing at the server (CODEX_HOME isolated in a temporary directory).

The provider block is what docs/clients.md tells a user to write. Besides it, the config turns
off what a local server cannot serve: the hosted web_search tool (`web_search = "disabled"`)
and the sub-agent tools, which Codex sends as a `namespace` tool (`[agents] enabled = false`);
and the update check and analytics, which would call OpenAI."""

from __future__ import annotations

import json

import pytest

from tests.support.clients import client_env, run_client
from worker.tiny_models.scripted import ANSWER

pytestmark = pytest.mark.clients
MIN_CACHED_SHARE = 0.8
CONFIG = """\
model = "{model}"
model_provider = "vllm-omni-mlx"
web_search = "disabled"
check_for_update_on_startup = false

[agents]
enabled = false

[analytics]
enabled = false

[model_providers.vllm-omni-mlx]
name = "vllm-omni-mlx"
base_url = "{url}/v1"
env_key = "VOMLX_API_KEY"
wire_api = "responses"
"""


def run_codex(node_clients, client_server, tmp_path, prompt: str) -> list[dict]:
    """`codex exec --json PROMPT` in a fresh CODEX_HOME (a new session); its JSON events."""
    codex_home = tmp_path / "codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        CONFIG.format(model=client_server.model, url=client_server.url)
    )
    work = tmp_path / "project"
    work.mkdir(parents=True, exist_ok=True)
    env = client_env(tmp_path, CODEX_HOME=str(codex_home), VOMLX_API_KEY=client_server.api_key)
    done = run_client(
        [
            node_clients.bin("codex"),
            "exec",
            "--strict-config",  # a config key this version does not know is an error
            "--skip-git-repo-check",
            "--json",
            prompt,
        ],
        env,
        work,
        timeout=180,
    )
    report = f"{done.describe()}\n--- server log ---\n{client_server.log_tail()}"
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    kinds = [event["type"] for event in events]
    completed = done.returncode == 0 and "turn.completed" in kinds and "turn.failed" not in kinds
    assert completed, report
    messages = [
        event["item"]["text"]
        for event in events
        if event["type"] == "item.completed" and event["item"]["type"] == "agent_message"
    ]
    assert messages == [ANSWER], report
    return events


def test_codex_exec_completes_a_turn(node_clients, client_server, tmp_path):
    run_codex(node_clients, client_server, tmp_path, "Say hello.")


def test_a_new_session_reads_the_instructions_and_tools_from_the_prefix_cache(
    node_clients, client_server, tmp_path
):
    """A second `codex exec` (a new session, another request) re-sends Codex's instructions
    and tool definitions unchanged: the prefix cache serves them (6,762 of 7,583 prompt
    tokens with Codex 0.171.0; the rest is the session's own context and request)."""
    run_codex(node_clients, client_server, tmp_path / "a", "Say hello.")
    events = run_codex(node_clients, client_server, tmp_path / "b", "Say hi.")
    [usage] = [event["usage"] for event in events if event["type"] == "turn.completed"]
    assert usage["cached_input_tokens"] >= MIN_CACHED_SHARE * usage["input_tokens"], usage
