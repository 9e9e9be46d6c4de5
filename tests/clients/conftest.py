"""The client tier: real clients (agents, SDKs, CLIs) talk to one real server per session.

The server serves the `qwen3_scripted` checkpoint (worker/tiny_models/scripted.py): it thinks
`THINKING`, answers `ANSWER` and ends its turn, calls the `llm_time` tool in auto mode when a
request bans <think>, answers after a tool result, and takes long prompts fast. Next to it,
`--embedding-model` serves the tiny BERT sentence encoder (`bert` / `tiny`) for the clients'
embedding calls. Every test
module here is marked `clients` (deselect the tier with `-m "not clients"`). The clients are
installed (pinned) by tests/support/clients.py; a test skips only when its client cannot be
installed.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

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
from worker.tiny_models import ensure_checkpoint


@pytest.fixture(scope="session")
def scripted_checkpoint() -> Path:
    return ensure_checkpoint("qwen3_scripted")


@pytest.fixture(scope="session")
def embedding_checkpoint() -> Path:
    return ensure_checkpoint("bert", "tiny")


@pytest.fixture(scope="session")
def client_server(tmp_path_factory, scripted_checkpoint, embedding_checkpoint) -> ClientServer:
    log = tmp_path_factory.mktemp("logs") / "clients-server.log"
    argv = [str(scripted_checkpoint), "--embedding-model", str(embedding_checkpoint)]
    process = ServerProcess(argv, log, api_key=API_KEY)
    try:
        process.wait_healthy()
        models = httpx.get(f"{process.url}/v1/models", headers=process.headers, timeout=10)
        models.raise_for_status()
        cards = models.json()["data"]
        model = cards[0]["id"]
        embedder = next(c["id"] for c in cards if "embed" in c.get("capabilities", []))
        yield ClientServer(process, scripted_checkpoint, model, embedder, embedding_checkpoint)
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


@pytest.fixture(scope="session")
def direct_embeddings(embedding_checkpoint):
    """texts -> the embedding checkpoint's vectors computed directly with mlx-embeddings (mean
    pooled and normalised, as its sentence-transformers config says)."""
    import numpy as np
    from mlx_embeddings.utils import generate, load

    model, tokenizer = load(str(embedding_checkpoint))
    return lambda texts: np.array(generate(model, tokenizer, texts).text_embeds)
