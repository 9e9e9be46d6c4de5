"""Fixtures that run the real server: the gateway process and its MLX worker process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.server import ADMIN_KEY, API_KEY, ServerProcess
from tests.support.video_direct import HAS_FFMPEG
from worker.tiny_models import ensure_checkpoint


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def qwen3_path() -> str:
    return str(ensure_checkpoint("qwen3"))


@pytest.fixture(scope="session")
def llama_path() -> str:
    return str(ensure_checkpoint("llama"))


@pytest.fixture(scope="session")
def start_server(tmp_path_factory):
    """Starts servers that live until the end of the session (or until a test stops them)."""
    started: list[ServerProcess] = []

    def start(
        *args: str, api_key: str | None = API_KEY, name: str = "server", cwd: Path | None = None
    ) -> ServerProcess:
        log = tmp_path_factory.mktemp("logs") / f"{name}.log"
        server = ServerProcess(
            list(args), log, api_key=api_key, admin_key=api_key and ADMIN_KEY, cwd=cwd
        )
        started.append(server)
        server.wait_healthy()
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def default_server(start_server, qwen3_path) -> ServerProcess:
    """The tiny random-weight qwen3 most end-to-end tests compare with direct mlx-lm (`serve`
    with no MODEL serves the real embedded default: tests/weights/test_embedded_default.py)."""
    return start_server(qwen3_path, name="default")


@pytest.fixture(scope="session")
def llama_server(start_server, llama_path) -> ServerProcess:
    return start_server(llama_path, name="llama")


@pytest.fixture(scope="session")
def speech_paths() -> dict[str, str]:
    return {"tts": str(ensure_checkpoint("qwen3_tts")), "asr": str(ensure_checkpoint("whisper"))}


@pytest.fixture(scope="session")
def embedding_path() -> str:
    return str(ensure_checkpoint("bert", "tiny"))


@pytest.fixture(scope="session")
def full_server(start_server, qwen3_path, speech_paths, embedding_path) -> ServerProcess:
    """The tiny qwen3 with a TTS, a speech-recognition, an embedding, an image and a video
    model next to it: every OpenAI operation the server has is served (the schema tests use
    it)."""
    return start_server(
        qwen3_path,
        "--speech-model",
        speech_paths["tts"],
        "--transcription-model",
        speech_paths["asr"],
        "--embedding-model",
        embedding_path,
        "--image-model",
        str(ensure_checkpoint("z_image", "tiny")),
        *(("--video-model", str(ensure_checkpoint("minimax_h3", "tiny"))) if HAS_FFMPEG else ()),
        name="full",
    )


@pytest.fixture(scope="session")
def servers(default_server, llama_server, qwen3_path, llama_path) -> dict:
    return {
        "qwen3": (default_server, qwen3_path),
        "llama": (llama_server, llama_path),
    }
