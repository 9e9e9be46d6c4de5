"""The media and backend flags of `serve`: into ServerConfig, and `--backend` to the worker."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gateway.cli import main as cli
from gateway.config import ServerConfig
from gateway.workers.worker_process import default_worker_command
from protocol import Endpoints
from protocol.launch.python import python_module
from tests.support.fake_server import FakeServer
from worker.runtime.process import parse_args


def test_media_flags_reach_the_config(no_serving, tmp_path):  # noqa: F811
    media = tmp_path / "media"
    media.mkdir()
    args = [
        "serve", str(tmp_path), "--allowed-local-media-path", str(media),
        "--media-max-bytes", "1000", "--media-fetch-timeout", "2.5",
        "--max-image-pixels", "640000", "--backend", "omni",
    ]  # fmt: skip
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.output
    config = no_serving[0].config
    assert config.allowed_local_media_path == str(media.resolve())
    assert (config.media_max_bytes, config.media_fetch_timeout) == (1000, 2.5)
    assert (config.max_image_pixels, config.backend) == (640_000, "omni")


def test_media_defaults(no_serving, tmp_path):  # noqa: F811
    result = CliRunner().invoke(cli.main, ["serve", str(tmp_path)])
    assert result.exit_code == 0, result.output
    config = no_serving[0].config
    assert config.allowed_local_media_path is None
    assert (config.media_max_bytes, config.media_fetch_timeout) == (20 * 2**20, 10.0)
    assert (config.max_image_pixels, config.backend) == (40_000_000, "auto")


@pytest.mark.parametrize(
    "args", [["--backend", "vision"], ["--allowed-local-media-path", "/no/such/dir"]]
)
def test_bad_media_flags_are_refused(no_serving, tmp_path, args):  # noqa: F811
    result = CliRunner().invoke(cli.main, ["serve", str(tmp_path), *args])
    assert result.exit_code != 0
    assert FakeServer.instances == []


@pytest.mark.parametrize("backend", ["text", "omni"])
def test_backend_is_forwarded_to_the_worker(backend):
    config = ServerConfig(model="m", served_model_name="m", backend=backend)
    argv = default_worker_command(config, "m", Endpoints("ipc://a", "ipc://b"))
    assert parse_args(argv[len(python_module("worker")) :]).backend == backend


def test_the_auto_backend_is_the_workers_default():
    config = ServerConfig(model="m", served_model_name="m")
    argv = default_worker_command(config, "m", Endpoints("ipc://a", "ipc://b"))
    assert "--backend" not in argv
    assert parse_args(argv[len(python_module("worker")) :]).backend == "auto"


@pytest.mark.parametrize("entries", [0, 5])
def test_vision_cache_entries_reach_the_worker(entries):
    config = ServerConfig(model="m", served_model_name="m", vision_cache_entries=entries)
    argv = default_worker_command(config, "m", Endpoints("ipc://a", "ipc://b"))
    assert parse_args(argv[len(python_module("worker")) :]).vision_cache_entries == entries


def test_a_negative_vision_cache_is_refused_by_the_worker():
    with pytest.raises(SystemExit):
        parse_args(["--model", "m", "--vision-cache-entries", "-1"])
