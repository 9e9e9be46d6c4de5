"""The `vllm-omni-mlx` CLI, model resolution, and the gateway's no-MLX import rule."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from huggingface_hub.errors import LocalEntryNotFoundError

from gateway.cli import main as cli
from gateway.workers.checkpoints import ModelDownloadFailed, ModelNotFound, locate_checkpoint
from gateway.workers.errors import SwapFailed
from tests.support.fake_engine import FakeEngine, fake_checkpoint, make_client
from tests.support.fake_server import FakeServer

FORBIDDEN = ("mlx", "mlx_lm", "mlx_vlm", "mlx_audio", "transformers")


def test_gateway_app_and_cli_do_not_import_mlx_or_transformers():
    code = (
        "import sys, gateway.app, gateway.cli.main, gateway.workers.client\n"
        f"print([m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- model resolution ----------------------------------------------------------------------


def test_local_directory_resolves_to_itself_named_by_basename(tmp_path):
    model = tmp_path / "my-model"
    model.mkdir()
    resolved = locate_checkpoint(str(model))
    assert (resolved.path, resolved.name) == (str(model), "my-model")


def test_hub_repo_id_is_downloaded_and_named_by_the_repo_id(tmp_path):
    calls = []

    def download(repo_id: str) -> str:
        calls.append(repo_id)
        return str(tmp_path)

    resolved = locate_checkpoint("org/model", download=download)
    assert calls == ["org/model"]
    assert (resolved.path, resolved.name) == (str(tmp_path), "org/model")


def test_offline_hub_download_is_a_clear_error():
    def download(repo_id: str) -> str:
        raise LocalEntryNotFoundError("no network")

    with pytest.raises(ModelDownloadFailed, match="unreachable"):
        locate_checkpoint("org/model", download=download)


@pytest.mark.parametrize("model", ["/no/such/dir", "./missing", "not a repo id!!"])
def test_missing_directories_and_invalid_ids_are_not_found(model):
    with pytest.raises(ModelNotFound):
        locate_checkpoint(model, download=lambda repo_id: pytest.fail("must not download"))


# -- serve ---------------------------------------------------------------------------------


@pytest.mark.parametrize("files", [[], ["config.json"], ["model.safetensors"]])
def test_serve_of_an_incomplete_checkpoint_fails_at_once_naming_what_is_missing(
    no_serving, tmp_path, files
):
    checkpoint = tmp_path / "incomplete"
    checkpoint.mkdir()
    for name in files:
        (checkpoint / name).write_text("{}")
    result = CliRunner().invoke(cli.main, ["serve", str(checkpoint)])
    assert result.exit_code != 0 and no_serving == []
    missing = "weights" if "config.json" in files else "config.json"
    assert result.output.startswith("Error: ") and f"has no {missing}" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_serve_builds_the_config_from_its_options(no_serving, tmp_path):
    fake_checkpoint(tmp_path)
    args = [
        "serve", str(tmp_path), "--port", "9001", "--api-key", "k", "--served-model-name", "m",
        "--max-tokens", "64", "--max-num-seqs", "2", "--max-queue", "3", "--max-body-mb", "1",
    ]  # fmt: skip
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.output
    config = no_serving[0].config
    assert (config.model, config.served_model_name, config.port) == (str(tmp_path), "m", 9001)
    assert (config.api_keys, config.max_tokens, config.max_num_seqs) == (("k",), 64, 2)
    assert (config.max_queue, config.max_body_bytes) == (3, 2**20)
    assert FakeServer.instances[0].config.port == 9001


def test_the_older_speech_flag_names_still_work(no_serving, tmp_path):
    model, tts, asr = (tmp_path / n for n in ("m", "tts", "asr"))
    for path in (model, tts, asr):
        fake_checkpoint(path)
    args = ["serve", str(model), "--tts-model", str(tts), "--asr-model", str(asr)]
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.output
    config = no_serving[0].config
    assert (config.speech_model, config.transcription_model) == (str(tts), str(asr))


def test_lora_modules_become_the_configs_adapters(no_serving, tmp_path):
    model, adapter = tmp_path / "m", tmp_path / "sql"
    fake_checkpoint(model)
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    args = ["serve", str(model), "--lora-modules", f"sql={adapter}", "--max-loras", "3"]
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.output
    config = no_serving[0].config
    assert (config.lora_modules, config.max_loras) == ((("sql", str(adapter)),), 3)


@pytest.mark.parametrize(
    "entry, words",
    [
        ("sql", "is not NAME=PATH"),
        ("sql={tmp}/nothing", "no adapter_config.json"),
        ("a b={adapter}", "is not an adapter name"),
        ("m={adapter}", "names the served model"),
    ],
)
def test_bad_lora_modules_stop_the_start_naming_the_flag(no_serving, tmp_path, entry, words):
    model, adapter = tmp_path / "m", tmp_path / "sql"
    fake_checkpoint(model)
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    entry = entry.format(tmp=tmp_path, adapter=adapter)
    result = CliRunner().invoke(cli.main, ["serve", str(model), "--lora-modules", entry])
    assert result.exit_code == 2 and "--lora-modules" in result.output, result.output
    assert words in result.output


def test_serve_reads_the_api_key_from_the_environment(no_serving, tmp_path):
    fake_checkpoint(tmp_path)
    result = CliRunner().invoke(cli.main, ["serve", str(tmp_path)], env={"VOMLX_API_KEY": "env"})
    assert result.exit_code == 0, result.output
    assert no_serving[0].config.api_keys == ("env",)


def test_serve_without_model_serves_the_embedded_default_with_its_speech_models(
    no_serving, monkeypatch, tmp_path
):
    from gateway.cli import default_models

    chat, asr, tts = (tmp_path / n for n in ("chat", "asr", "tts"))
    for path in (chat, asr, tts):
        fake_checkpoint(path)
    fetched = default_models.DefaultModels(
        str(chat), "SmolLM2-135M-Instruct", str(asr), str(tts), True
    )
    monkeypatch.setattr(default_models, "embedded_default", lambda echo, speech: fetched)
    result = CliRunner().invoke(cli.main, ["serve"])
    assert result.exit_code == 0, result.output
    config = no_serving[0].config
    assert (config.model, config.served_model_name) == (str(chat), "SmolLM2-135M-Instruct")
    assert (config.transcription_model, config.speech_model) == (str(asr), str(tts))
    if sys.platform.startswith("linux") and default_models.default_dtype() is None:
        assert config.dtype == "float32"  # Whisper on BLAS, not mlx-audio's float16
    result = CliRunner().invoke(cli.main, ["serve", "--transcription-model", str(tts)])
    assert no_serving[1].config.transcription_model == str(
        tts
    )  # a flag given wins over the default


def test_the_embedded_default_falls_back_to_random_tiny_checkpoints_and_says_so(
    monkeypatch, tmp_path
):
    from gateway.cli import default_models

    def fake(command):
        if "worker.convert.packages" in command:
            raise default_models.DefaultUnavailable("no index")
        return str(tmp_path / command[-1])

    monkeypatch.setattr(default_models, "_path_printed_by", fake)
    said = []
    got = default_models.embedded_default(said.append)
    # The documented id stays (the README's curl works), and the stand-in is said loudly.
    assert not got.real and got.name == default_models.CHAT_NAME == "Qwen2.5-Coder-0.5B-Instruct"
    assert got.chat.endswith("qwen3") and got.asr.endswith("whisper")
    assert got.tts.endswith("kokoro")  # the random Kokoro, in Kokoro-82M's layout
    assert any("could not be had (no index)" in line for line in said)
    assert any(line.startswith("WARNING:") and "RANDOM" in line for line in said)
    assert "RANDOM tiny stand-in" in got.summary


@pytest.mark.parametrize("editable", [True, False])
def test_the_install_hint_follows_how_the_package_was_installed(monkeypatch, editable):
    """A checkout (pip install -e) is told `pip install -e`, a wheel install the package's
    extra: never `-e '.[serve]'` to someone with no checkout."""
    from gateway.cli import default_models

    direct_url = {"url": "file:///src", "dir_info": {"editable": True}} if editable else None

    class Installed:
        def read_text(self, name):
            return json.dumps(direct_url) if name == "direct_url.json" and direct_url else None

    monkeypatch.setattr(default_models.importlib.metadata, "distribution", lambda _: Installed())
    hint = default_models.install_hint("serve")
    if editable:
        assert hint.startswith("pip install -e '.[serve]'")
    else:
        assert hint == "pip install 'vllm-omni-mlx[serve]'"


def _fake_commands(tmp_path):
    def fake(command):
        return str(tmp_path / command[-1])

    return fake


def test_the_start_up_line_says_what_the_embedded_default_really_serves(monkeypatch, tmp_path):
    from gateway.cli import default_models

    monkeypatch.setattr(default_models, "_path_printed_by", _fake_commands(tmp_path))
    got = default_models.embedded_default([].append)
    assert got.real and got.summary.startswith("chat Qwen2.5-Coder-0.5B-Instruct; ")
    assert "speech in Whisper tiny.en;" in got.summary and "RANDOM" not in got.summary
    assert got.summary.endswith("speech out Kokoro-82M")
    # Without mlx-audio there is no speech at all, and the line says so (with the hint).
    real_find_spec = default_models.importlib.util.find_spec
    monkeypatch.setattr(
        default_models.importlib.util,
        "find_spec",
        lambda name: None if name == "mlx_audio" else real_find_spec(name),
    )
    got = default_models.embedded_default([].append)
    assert got.asr is None and got.tts is None and "Whisper" not in got.summary
    assert "no speech in or out (mlx-audio is not installed: pip install" in got.summary


def test_a_speech_flag_given_with_the_default_is_what_the_start_up_line_names(
    no_serving, monkeypatch, tmp_path
):
    from gateway.cli import default_models

    mine = fake_checkpoint(tmp_path / "my-whisper")
    asked = []

    def fetched(echo, speech):
        asked.append(speech)
        summary = "chat C; speech in Whisper tiny.en; speech out T" if speech else "chat C"
        return default_models.DefaultModels(str(mine), "C", str(mine), str(mine), True, summary)

    monkeypatch.setattr(default_models, "embedded_default", fetched)
    result = CliRunner().invoke(cli.main, ["serve", "--transcription-model", str(mine)])
    assert result.exit_code == 0, result.output
    line = "The embedded default: chat C; speech out T; speech in "
    assert (
        f"{line}{mine} (--transcription-model)." in result.output and "Whisper" not in result.output
    )
    both = ["serve", "--transcription-model", str(mine), "--speech-model", str(mine)]
    assert CliRunner().invoke(cli.main, both).exit_code == 0
    assert asked == [True, False]  # neither default speech model is fetched for nothing


def test_serve_on_a_port_in_use_fails_before_anything_is_fetched(no_serving, tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(cli.main, ["serve", "--port", str(port)])
    assert result.exit_code != 0 and no_serving == []
    assert f"port {port} on 127.0.0.1 is in use" in result.output and "PORT=" in result.output
    assert "fetching" not in result.output


def test_serve_takes_the_short_name_of_a_pinned_model(no_serving, monkeypatch, tmp_path):
    from gateway.cli import default_models

    fetched = []
    monkeypatch.setattr(
        default_models, "converted", lambda key, dtype: fetched.append(key) or str(tmp_path)
    )
    result = CliRunner().invoke(cli.main, ["serve", "qwen2.5-coder-1.5b"])
    assert result.exit_code == 0, result.output
    assert fetched == ["qwen2.5-coder-1.5b-instruct"]
    assert no_serving[0].config.served_model_name == "Qwen2.5-Coder-1.5B-Instruct"


def test_the_model_flags_take_short_names_too(no_serving, monkeypatch, tmp_path):
    from gateway.cli import default_models

    fetched = []

    def converted(key, dtype):
        fetched.append(key)
        return str(fake_checkpoint(tmp_path / key))

    monkeypatch.setattr(default_models, "converted", converted)
    args = [
        "serve",
        "smollm2",
        "--transcription-model",
        "whisper-tiny",
        "--embedding-model",
        "minilm",
    ]
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.output
    assert sorted(fetched) == ["all-minilm-l6-v2", "smollm2-135m-instruct", "whisper-tiny.en"]
    config = no_serving[0].config
    assert config.transcription_model == str(tmp_path / "whisper-tiny.en")
    assert config.embedding_model == str(tmp_path / "all-minilm-l6-v2")


def test_models_list_names_every_model_that_installs_by_name():
    from protocol.pinned_models import PINNED

    result = CliRunner().invoke(cli.main, ["models", "list"])
    assert result.exit_code == 0
    for model in PINNED.values():
        assert all(name in result.output for name in (model.key, *model.short_names))
        assert model.facts and model.facts in result.output  # its size and speed here


def test_serve_help_names_the_default_it_really_serves():
    from gateway.cli.default_models import CHAT_NAME

    result = CliRunner().invoke(cli.main, ["serve", "--help"])
    assert CHAT_NAME in result.output and "tiny demo" not in result.output


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
    client = make_client(engine, api_key="k", admin_key="a")

    def request(method, url, headers=None, timeout=None, **kw):
        return client.request(
            method, url.replace("http://127.0.0.1:8000", ""), headers=headers, **kw
        )

    monkeypatch.setattr(httpx, "request", request)
    with client:
        yield engine


def test_models_load_calls_the_admin_endpoint(server, tmp_path):
    fake_checkpoint(tmp_path)
    args = ["models", "load", str(tmp_path), "--served-model-name", "m", "--admin-key", "a"]
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.output
    assert server.swaps == [(str(tmp_path), "m")]
    assert json.loads(result.output)["id"] == "m"


def test_models_load_failure_exits_non_zero_with_the_server_message(server, tmp_path):
    server.swap_error = SwapFailed("bad weights", restored=True)
    fake_checkpoint(tmp_path)
    result = CliRunner().invoke(cli.main, ["models", "load", str(tmp_path), "--admin-key", "a"])
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
