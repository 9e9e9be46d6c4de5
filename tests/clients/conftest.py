"""The client tier: real clients (agents, SDKs, CLIs) talk to one real server per session.

The server serves the `qwen3_scripted` checkpoint (scripts/checkpoints/scripted.py): it thinks
`THINKING`, answers `ANSWER` and ends its turn, calls the `llm_time` tool in auto mode when a
request bans <think>, answers after a tool result, and takes long prompts fast. Every test
module here is marked `clients` (deselect the tier with `-m "not clients"`). The clients are
installed (pinned) by tests/support/clients.py; a test skips only when its client cannot be
installed.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from scripts.checkpoints import ensure_checkpoint
from tests.support.clients import (
    FIXTURE_INSTALL_TIMEOUT,
    ClientServer,
    NodeClients,
    NotInstalled,
    PythonClients,
    ensure_node_clients,
    ensure_python_clients,
)
from tests.support.server import API_KEY, ServerProcess


@pytest.fixture(scope="session")
def scripted_checkpoint() -> Path:
    return ensure_checkpoint("qwen3_scripted")


@pytest.fixture(scope="session")
def client_server(tmp_path_factory, scripted_checkpoint) -> ClientServer:
    log = tmp_path_factory.mktemp("logs") / "clients-server.log"
    process = ServerProcess([str(scripted_checkpoint)], log, api_key=API_KEY)
    try:
        process.wait_healthy()
        models = httpx.get(f"{process.url}/v1/models", headers=process.headers, timeout=10)
        models.raise_for_status()
        model = models.json()["data"][0]["id"]
        yield ClientServer(process, scripted_checkpoint, model)
    finally:
        process.stop()


@pytest.fixture(scope="session")
def node_clients() -> NodeClients:
    try:
        return ensure_node_clients(FIXTURE_INSTALL_TIMEOUT)
    except NotInstalled as exc:
        pytest.skip(f"the Node clients could not be installed: {exc}")


@pytest.fixture(scope="session")
def python_clients() -> PythonClients:
    try:
        return ensure_python_clients(FIXTURE_INSTALL_TIMEOUT)
    except NotInstalled as exc:
        pytest.skip(f"the Python clients could not be installed: {exc}")
