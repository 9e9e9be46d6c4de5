"""OpenCode (`opencode run`, Chat Completions through its OpenAI-compatible provider) completes a
turn against the server, and a new session reads OpenCode's prompt from the prefix cache.

The provider block is what docs/clients.md tells a user to write (its config file given by
OPENCODE_CONFIG). Besides it, the environment turns off what would reach the network: the
models.dev catalogue, the update check, the default plugins and LSP downloads. OpenCode's
prompt (system prompt and its tool definitions: bash, read, edit, ...) is ~8,400 tokens of this
model's tokenizer; it also asks the model for a title (a second, small request)."""

from __future__ import annotations

import json

import pytest

from tests.support.clients import client_env, run_client
from worker.tiny_models.scripted import ANSWER

pytestmark = pytest.mark.clients
MIN_CACHED_SHARE = 0.9
OFFLINE = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
}


def config(url: str, model: str) -> dict:
    return {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            "vllm-omni-mlx": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "vllm-omni-mlx",
                "options": {"baseURL": f"{url}/v1", "apiKey": "{env:VOMLX_API_KEY}"},
                "models": {model: {"name": model}},
            }
        },
        "model": f"vllm-omni-mlx/{model}",
    }


def run_opencode(node_clients, client_server, home, work, prompt: str) -> list[dict]:
    """`opencode run --format json PROMPT` in the project directory `work`, with a fresh home
    (a new session); its JSON events, asserted to end the turn with the scripted answer."""
    home.mkdir(parents=True)
    path = home / "opencode.json"
    path.write_text(json.dumps(config(client_server.url, client_server.model)))
    work.mkdir(parents=True, exist_ok=True)
    env = client_env(
        home, OPENCODE_CONFIG=str(path), VOMLX_API_KEY=client_server.api_key, **OFFLINE
    )
    done = run_client(
        [node_clients.bin("opencode"), "run", "--format", "json", prompt], env, work, timeout=180
    )
    report = f"{done.describe()}\n--- server log ---\n{client_server.log_tail()}"
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    texts = [e["part"]["text"] for e in events if e["type"] == "text"]
    finishes = [e["part"]["reason"] for e in events if e["type"] == "step_finish"]
    assert done.returncode == 0 and texts == [ANSWER] and finishes == ["stop"], report
    assert not [e for e in events if e["type"] == "error"], report
    return events


def test_opencode_run_completes_a_turn(node_clients, client_server, tmp_path):
    run_opencode(node_clients, client_server, tmp_path / "home", tmp_path / "project", "Hello.")


def test_a_new_session_reads_the_system_prompt_and_tools_from_the_prefix_cache(
    node_clients, client_server, tmp_path
):
    """A second `opencode run` in the same project (a new session, a new home) sends OpenCode's
    system prompt and tool definitions again: the prefix cache serves all of them (8,366 of
    8,378 prompt tokens with OpenCode 1.18.33; the usage's `cached_tokens`, which its provider
    reports as `cache.read`). (The system prompt names the project's directory ~2,200 tokens
    in: a session in another directory shares only what comes before.)"""
    work = tmp_path / "project"
    run_opencode(node_clients, client_server, tmp_path / "a", work, "Say hello.")
    events = run_opencode(node_clients, client_server, tmp_path / "b", work, "Say hi.")
    [tokens] = [e["part"]["tokens"] for e in events if e["type"] == "step_finish"]
    read, new = tokens["cache"]["read"], tokens["input"]
    assert read >= MIN_CACHED_SHARE * (read + new), tokens
