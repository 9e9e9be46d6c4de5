"""Claude Code (`claude -p`, its default configuration: thinking on, all default tools) completes
a turn, and a `--resume`d second turn reads at least 90% of its prompt from the prefix cache.

Claude Code's prompt (system prompt, tool definitions, reminders) is about 15K tokens of this
model's tokenizer; the second turn resends all of it plus the first turn, so all but the new
user message should come from the prefix cache (`cache_read_input_tokens`)."""

from __future__ import annotations

import json

import pytest

from tests.support.clients import client_env, run_client
from worker.tiny_models.scripted import ANSWER

pytestmark = pytest.mark.clients
MIN_CACHED_SHARE = 0.9
MIN_NEW_SESSION_SHARE = 0.75


def claude_runner(node_clients, server, model: str, home):
    """`claude ARGS...` against `server` serving `model`, in a home of its own; the parsed
    JSON result, asserted successful."""
    work = home / "project"
    work.mkdir(parents=True)
    env = client_env(
        home,
        ANTHROPIC_BASE_URL=server.url,
        ANTHROPIC_API_KEY=server.api_key,
        ANTHROPIC_MODEL=model,
        ANTHROPIC_DEFAULT_HAIKU_MODEL=model,
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
        # Claude Code's documented switches for everything but the model's own requests.
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
    )

    def run(*args: str) -> dict:
        done = run_client([node_clients.bin("claude"), *args], env, work, timeout=180)
        report = f"{done.describe()}\n--- server log ---\n{server.log()[-4000:]}"
        lines = done.stdout.strip().splitlines()
        result = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
        succeeded = done.returncode == 0 and result.get("is_error") is False
        assert succeeded, report
        return result

    return run


@pytest.fixture(scope="module")
def claude(node_clients, client_server, tmp_path_factory):
    home = tmp_path_factory.mktemp("claude-home")
    return claude_runner(node_clients, client_server.process, client_server.model, home)


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
    is not part of the prompt (gateway/api/anthropic_messages/attribution.py), so the new session's first
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


def test_a_model_with_less_context_than_its_max_tokens_still_completes_a_turn(
    node_clients, scripted_checkpoint, tmp_path_factory
):
    """Claude Code asks for max_tokens 32000; above a model's context that is a 400 in
    Anthropic's words (`max_tokens: 32000 > 24576, which is the maximum allowed ...`), which
    Claude Code reads and retries with the limit it names: one wasted request, then a turn."""
    import json as json_module
    import shutil

    from tests.support.server import API_KEY, ServerProcess

    root = tmp_path_factory.mktemp("small-context")
    checkpoint = root / "scripted-24k"
    shutil.copytree(scripted_checkpoint, checkpoint)
    config = json_module.loads((checkpoint / "config.json").read_text())
    config["max_position_embeddings"] = 24576  # Claude Code's ~15K-token prompt still fits
    (checkpoint / "config.json").write_text(json_module.dumps(config))
    server = ServerProcess([str(checkpoint)], root / "server.log", api_key=API_KEY)
    try:
        server.wait_healthy()
        run = claude_runner(node_clients, server, checkpoint.name, root / "home")
        result = run("-p", "Say hello.", "--output-format", "json")
        assert result["result"] == ANSWER
    finally:
        server.stop()
