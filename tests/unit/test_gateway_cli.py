"""The `vllm-omni-mlx` CLI, model resolution, and the gateway's no-MLX import rule."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from huggingface_hub.errors import LocalEntryNotFoundError

from gateway.cli import main as cli
from gateway.engine.errors import SwapFailed
from gateway.engine.model_resolver import ModelDownloadFailed, ModelNotFound, resolve_model
from tests.support.fake_engine import FakeEngine, make_client
from tests.support.fake_server import FakeServer

FORBIDDEN = ("mlx", "mlx_lm", "mlx_vlm", "mlx_audio", "transformers")


def test_gateway_app_and_cli_do_not_import_mlx_or_transformers():
    code = (
        "import sys, gateway.app, gateway.cli.main, gateway.engine.client\n"
        f"print([m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- model resolution ----------------------------------------------------------------------


def test_local_directory_resolves_to_itself_named_by_basename(tmp_path):
    model = tmp_path / "my-model"
    model.mkdir()
    resolved = resolve_model(str(model))
    assert (resolved.path, resolved.name) == (str(model), "my-model")


def test_hub_repo_id_is_downloaded_and_named_by_the_repo_id(tmp_path):
    calls = []

    def download(repo_id: str) -> str:
        calls.append(repo_id)
        return str(tmp_path)

    resolved = resolve_model("org/model", download=download)
    assert calls == ["org/model"]
    assert (resolved.path, resolved.name) == (str(tmp_path), "org/model")


def test_offline_hub_download_is_a_clear_error():
    def download(repo_id: str) -> str:
        raise LocalEntryNotFoundError("no network")

    with pytest.raises(ModelDownloadFailed, match="unreachable"):
        resolve_model("org/model", download=download)


@pytest.mark.parametrize("model", ["/no/such/dir", "./missing", "not a repo id!!"])
def test_missing_directories_and_invalid_ids_are_not_found(model):
    with pytest.raises(ModelNotFound):
        resolve_model(model, download=lambda repo_id: pytest.fail("must not download"))


# -- serve ---------------------------------------------------------------------------------


def test_serve_builds_the_config_from_its_options(no_serving, tmp_path):
    args = [
        "serve", str(tmp_path), "--port", "9001", "--api-key", "k", "--served-model-name", "m",
        "--max-tokens", "64", "--max-num-seqs", "2", "--max-queue", "3", "--max-body-mb", "1",
    ]  # fmt: skip
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.output
    config = no_serving[0].config
    assert (config.model, config.served_model_name, config.port) == (str(tmp_path), "m", 9001)
    assert (config.api_key, config.max_tokens, config.max_num_seqs) == ("k", 64, 2)
    assert (config.max_queue, config.max_body_bytes) == (3, 2**20)
    assert FakeServer.instances[0].config.port == 9001


def test_serve_reads_the_api_key_from_the_environment(no_serving, tmp_path):
    result = CliRunner().invoke(cli.main, ["serve", str(tmp_path)], env={"VOMLX_API_KEY": "env"})
    assert result.exit_code == 0, result.output
    assert no_serving[0].config.api_key == "env"


def test_serve_without_model_serves_the_embedded_default_with_its_speech_models(
    no_serving, monkeypatch, tmp_path
):
    from gateway.cli import default_models

    chat, asr, tts = (tmp_path / n for n in ("chat", "asr", "tts"))
    for path in (chat, asr, tts):
        path.mkdir()
    fetched = default_models.DefaultModels(
        str(chat), "SmolLM2-135M-Instruct", str(asr), str(tts), True
    )
    monkeypatch.setattr(default_models, "embedded_default", lambda echo: fetched)
    result = CliRunner().invoke(cli.main, ["serve"])
    assert result.exit_code == 0, result.output
    config = no_serving[0].config
    assert (config.model, config.served_model_name) == (str(chat), "SmolLM2-135M-Instruct")
    assert (config.asr_model, config.tts_model) == (str(asr), str(tts))
    if sys.platform.startswith("linux") and default_models.default_dtype() is None:
        assert config.dtype == "float32"  # Whisper on BLAS, not mlx-audio's float16
    result = CliRunner().invoke(cli.main, ["serve", "--asr-model", str(tts)])
    assert no_serving[1].config.asr_model == str(tts)  # a flag given wins over the default


def test_the_embedded_default_falls_back_to_random_tiny_checkpoints_and_says_so(
    monkeypatch, tmp_path
):
    from gateway.cli import default_models

    def fake(command):
        if "convert.packages" in command:
            raise default_models.DefaultUnavailable("no index")
        return str(tmp_path / command[-1])

    monkeypatch.setattr(default_models, "_path_printed_by", fake)
    said = []
    got = default_models.embedded_default(said.append)
    assert not got.real and got.name == "qwen3-tiny"
    assert got.chat.endswith("qwen3") and got.asr.endswith("whisper")
    assert any("could not be had (no index)" in line for line in said)


def test_serve_of_an_unreachable_hub_model_fails_clearly(no_serving, monkeypatch):
    import huggingface_hub

    def offline(repo_id: str) -> str:
        raise LocalEntryNotFoundError("offline")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    result = CliRunner().invoke(cli.main, ["serve", "org/model"])
    assert result.exit_code != 0
    assert "unreachable" in result.output
    assert no_serving == []


# -- admin commands ------------------------------------------------------------------------


@pytest.fixture
def server(monkeypatch):
    """Route the CLI's httpx calls into an in-process app over a fake engine."""
    import httpx

    engine = FakeEngine()
    client = make_client(engine, api_key="k")

    def request(method, url, headers=None, timeout=None, **kw):
        return client.request(
            method, url.replace("http://127.0.0.1:8000", ""), headers=headers, **kw
        )

    monkeypatch.setattr(httpx, "request", request)
    with client:
        yield engine


def test_models_load_calls_the_admin_endpoint(server, tmp_path):
    args = ["models", "load", str(tmp_path), "--served-model-name", "m", "--api-key", "k"]
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.output
    assert server.swaps == [(str(tmp_path), "m")]
    assert json.loads(result.output)["id"] == "m"


def test_models_load_failure_exits_non_zero_with_the_server_message(server, tmp_path):
    server.swap_error = SwapFailed("bad weights", restored=True)
    result = CliRunner().invoke(cli.main, ["models", "load", str(tmp_path), "--api-key", "k"])
    assert result.exit_code == 1
    assert "bad weights" in result.output


def test_stats_prints_the_worker_stats(server):
    result = CliRunner().invoke(cli.main, ["stats"], env={"VOMLX_API_KEY": "k"})
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"active": 0, "waiting": 0}


def test_stats_without_the_key_fails(server):
    result = CliRunner().invoke(cli.main, ["stats"], env={"VOMLX_API_KEY": ""})
    assert result.exit_code == 1
    assert "401" in result.output
