"""Claude Code (`claude -p`, its default configuration: thinking on, all default tools) completes
a turn, and a `--resume`d second turn reads at least 90% of its prompt from the prefix cache.

Claude Code's prompt (system prompt, tool definitions, reminders) is about 15K tokens of this
model's tokenizer; the second turn resends all of it plus the first turn, so all but the new
user message should come from the prefix cache (`cache_read_input_tokens`)."""

from __future__ import annotations

import json

import pytest

from scripts.checkpoints.scripted import ANSWER
from tests.support.clients import client_env, run_client

pytestmark = pytest.mark.clients
MIN_CACHED_SHARE = 0.9
MIN_NEW_SESSION_SHARE = 0.75


@pytest.fixture(scope="module")
def claude(node_clients, client_server, tmp_path_factory):
    home = tmp_path_factory.mktemp("claude-home")
    work = home / "project"
    work.mkdir()
    env = client_env(
        home,
        ANTHROPIC_BASE_URL=client_server.url,
        ANTHROPIC_API_KEY=client_server.api_key,
        ANTHROPIC_MODEL=client_server.model,
        ANTHROPIC_DEFAULT_HAIKU_MODEL=client_server.model,
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
        # Claude Code's documented switches for everything but the model's own requests.
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
    )

    def run(*args: str) -> dict:
        done = run_client([node_clients.bin("claude"), *args], env, work, timeout=180)
        report = f"{done.describe()}\n--- server log ---\n{client_server.log_tail()}"
        lines = done.stdout.strip().splitlines()
        result = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
        succeeded = done.returncode == 0 and result.get("is_error") is False
        assert succeeded, report
        return result

    return run


@pytest.fixture(scope="module")
def first_turn(claude) -> dict:
    return claude("-p", "Say hello.", "--output-format", "json")


def test_completes_a_turn(first_turn):
    assert first_turn["type"] == "result"
    assert first_turn["result"] == ANSWER
    assert first_turn["usage"]["output_tokens"] > 0


def test_resumed_turn_reads_its_prompt_from_the_prefix_cache(claude, first_turn):
    session = first_turn["session_id"]
    second = claude("-p", "Say hello again.", "--resume", session, "--output-format", "json")
    assert second["result"] == ANSWER
    assert second["session_id"] == session
    usage = second["usage"]
    cached = usage["cache_read_input_tokens"]
    prompt = usage["input_tokens"] + cached + usage["cache_creation_input_tokens"]
    assert cached >= MIN_CACHED_SHARE * prompt, usage


def test_a_new_session_reads_the_system_prompt_and_tools_from_the_prefix_cache(claude, first_turn):
    """Another session starts with another first message, so Claude Code's attribution line
    (`cc_version=...<suffix>`, the first system block) differs from the first session's: it
    is not part of the prompt (gateway/anthropic/attribution.py), so the new session's first
    request reads the system prompt and the tool definitions from the prefix cache. What
    follows them differs: the session's first message, then a `role: "system"` message with
    the environment (~2.8K tokens), so about 80 % of the prompt can be reused (with the line
    in the prompt, none of it: it is the prompt's first text)."""
    other = claude("-p", "Say hi.", "--output-format", "json")
    assert other["result"] == ANSWER
    assert other["session_id"] != first_turn["session_id"]
    usage = other["usage"]
    cached = usage["cache_read_input_tokens"]
    prompt = usage["input_tokens"] + cached + usage["cache_creation_input_tokens"]
    assert cached >= MIN_NEW_SESSION_SHARE * prompt, usage
