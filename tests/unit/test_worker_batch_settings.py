"""Generation flags from `serve` to the worker: CLI -> ServerConfig -> argv/env -> worker args;
the OpenBLAS preload (protocol/launch/blas.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from gateway.cli import main as cli
from gateway.config import ServerConfig
from gateway.workers.worker_process import default_worker_command, worker_env
from protocol import Endpoints
from protocol.launch import blas
from protocol.launch.python import python_module
from tests.support.fake_engine import fake_checkpoint
from worker.runtime.process import parse_args

LIB = "/usr/lib/x86_64-linux-gnu/libopenblas.so.0"
REQUIRED = ["--model", "m", "--to-worker", "a", "--from-worker", "b", "--parent-pid", "1"]


@pytest.fixture
def openblas_at(monkeypatch):
    def place(path):
        monkeypatch.setattr(blas, "find_openblas", lambda: path)

    return place


def test_auto_preloads_an_installed_openblas(openblas_at):
    openblas_at(LIB)
    assert blas.blas_environment("auto", {})["LD_PRELOAD"] == LIB


def test_auto_keeps_what_ld_preload_already_had(openblas_at):
    openblas_at(LIB)
    env = blas.blas_environment("auto", {"LD_PRELOAD": "/x/libfoo.so"})
    assert env["LD_PRELOAD"] == f"/x/libfoo.so {LIB}"
    assert blas.blas_environment("auto", env)["LD_PRELOAD"] == env["LD_PRELOAD"]


def test_openblas_keeps_its_own_thread_settings_or_the_users(openblas_at):
    openblas_at(LIB)
    assert "OPENBLAS_THREAD_TIMEOUT" not in blas.blas_environment("auto", {})
    env = blas.blas_environment("openblas", {"OPENBLAS_THREAD_TIMEOUT": "20"})
    assert env["OPENBLAS_THREAD_TIMEOUT"] == "20"
    assert "OPENBLAS_THREAD_TIMEOUT" not in blas.blas_environment("bundled", {})


def test_auto_without_openblas_leaves_the_environment_alone(openblas_at):
    openblas_at(None)
    assert blas.blas_environment("auto", {"A": "1"}) == {"A": "1"}


def test_bundled_never_preloads_and_drops_an_inherited_openblas(openblas_at):
    openblas_at(LIB)
    env = blas.blas_environment("bundled", {"LD_PRELOAD": f"/x/libfoo.so:{LIB}"})
    assert env["LD_PRELOAD"] == "/x/libfoo.so"
    assert "LD_PRELOAD" not in blas.blas_environment("bundled", {"LD_PRELOAD": LIB})


def test_openblas_without_the_library_is_a_clear_error(openblas_at):
    openblas_at(None)
    with pytest.raises(blas.BlasUnavailable, match="libopenblas0-pthread"):
        blas.blas_environment("openblas", {})


def test_off_linux_there_is_nothing_to_preload(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert blas.find_openblas() is None


def test_ldconfig_listing_finds_the_library_of_this_architecture(monkeypatch, tmp_path):
    lib = tmp_path / "libopenblas.so.0"
    lib.write_bytes(b"")
    listing = (
        f"\tlibopenblas.so.0 (libc6,AArch64) => /nowhere/libopenblas.so.0\n"
        f"\tlibopenblas.so.0 (libc6,x86-64) => {lib}\n"
    )
    monkeypatch.setattr(
        subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=listing)
    )
    assert blas._from_ldconfig("x86-64") == str(lib)
    assert blas._from_ldconfig("AArch64") is None  # listed, but not on disk


@pytest.mark.skipif(blas.find_openblas() is None, reason="no OpenBLAS installed here")
def test_a_preloaded_openblas_is_what_mlx_matmul_runs_on():
    """Functional, not timed (speed lives in docs/benchmarks.md): with the preload MLX's
    process has OpenBLAS mapped and matmul results agree with the bundled BLAS."""
    code = textwrap.dedent(
        """
        import mlx.core as mx
        from protocol.launch.blas import loaded_openblas
        mx.random.seed(0)
        a = mx.random.normal((64, 64))
        print(loaded_openblas() is not None, float((a @ a).sum()))
        """
    )

    def run(mode: str) -> tuple[str, float]:
        env = blas.blas_environment(mode, {"PATH": "/usr/bin:/bin"})
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        return out[0], float(out[1])

    (with_loaded, fast), (without_loaded, slow) = run("openblas"), run("bundled")
    assert (with_loaded, without_loaded) == ("True", "False")
    assert fast == pytest.approx(slow, rel=1e-4)


def test_the_worker_refuses_to_start_without_the_openblas_it_must_have(monkeypatch):
    from worker.text.args import check_blas

    monkeypatch.setattr(blas, "loaded_openblas", lambda: None)
    with pytest.raises(blas.BlasUnavailable, match="not loaded"):
        check_blas("openblas")
    check_blas("auto")


def test_every_generation_setting_reaches_the_worker_command_line(tmp_path):
    config = ServerConfig(
        model="m",
        served_model_name="m",
        prefill_step_size=64,
        draft_model="/d",
        num_draft_tokens=4,
        kv_bits=8,
        kv_group_size=32,
        quantized_kv_start=0,
        max_kv_size=512,
        dtype="float32",
        blas="bundled",
        prefix_cache_bytes=0,
        ssd_cache_dir=str(tmp_path),
        ssd_cache_max_gb=2.0,
        warm_prompts="/w.jsonl",
    )
    argv = default_worker_command(config, "m", Endpoints("ipc://a", "ipc://b"))
    args = parse_args(argv[len(python_module("worker")) :])
    assert (args.prefill_step_size, args.draft_model, args.num_draft_tokens) == (64, "/d", 4)
    assert (args.kv_bits, args.kv_group_size, args.quantized_kv_start) == (8, 32, 0)
    assert (args.max_kv_size, args.dtype, args.blas) == (512, "float32", "bundled")
    assert (args.prefix_cache_bytes, args.ssd_cache_dir) == (0, str(tmp_path))
    assert (args.ssd_cache_max_gb, args.warm_prompts) == (2.0, "/w.jsonl")


def test_unset_settings_leave_the_worker_its_defaults():
    config = ServerConfig(model="m", served_model_name="m")
    argv = default_worker_command(config, "m", Endpoints("ipc://a", "ipc://b"))
    assert "--draft-model" not in argv and "--kv-bits" not in argv
    args = parse_args(argv[len(python_module("worker")) :])
    assert (args.prefill_step_size, args.kv_bits, args.max_kv_size) == (2048, None, None)
    assert args.prefix_cache_bytes == config.prefix_cache_bytes


def test_the_worker_environment_carries_the_preload(openblas_at):
    openblas_at(LIB)
    env = worker_env("m", ServerConfig(model="m", served_model_name="m", blas="auto"))
    assert env["LD_PRELOAD"].endswith(LIB)


@pytest.mark.parametrize(
    "flags, complaint",
    [
        (["--max-kv-size", "4"], "--max-kv-size"),
        (["--prefill-step-size", "0"], "--prefill-step-size"),
        (["--kv-bits", "7"], "--kv-bits"),
        (["--blas", "mkl"], "--blas"),
        (["--prefill-interleave", "-1"], "--prefill-interleave"),
        (["--prefill-interleave", "nan"], "--prefill-interleave"),
    ],
)
def test_the_worker_rejects_bad_generation_flags(flags, complaint, capsys):
    with pytest.raises(SystemExit):
        parse_args(REQUIRED + flags)
    assert complaint in capsys.readouterr().err


@pytest.fixture
def configs(monkeypatch, tmp_path):
    """`serve` wired to record its ServerConfig instead of serving (`tmp_path` made to look
    like a checkpoint)."""
    import uvicorn

    fake_checkpoint(tmp_path)
    import gateway.workers.client

    seen: list[ServerConfig] = []

    class Recording:
        def __init__(self, config) -> None:
            seen.append(config)

    class NoServer:
        def __init__(self, config) -> None:
            self.started = True

        def run(self) -> None:
            pass

    monkeypatch.setattr(gateway.workers.client, "WorkerEngineClient", Recording)
    monkeypatch.setattr(uvicorn, "Server", NoServer)
    monkeypatch.setattr("gateway.app.create_app", lambda config, engine: None)
    return seen


def test_serve_puts_the_generation_flags_in_the_config(configs, tmp_path, openblas_at):
    openblas_at(LIB)
    warm = tmp_path / "warm.jsonl"
    warm.write_text('"Once upon a time"\n')
    draft = fake_checkpoint(tmp_path / "draft")
    args = [
        "serve", str(tmp_path), "--prefill-step-size", "256", "--draft-model", str(draft),
        "--kv-bits", "4", "--kv-group-size", "32", "--max-kv-size", "1024", "--dtype", "float32",
        "--blas", "openblas", "--prefix-cache-bytes", "0", "--warm-prompts", str(warm),
        "--prefill-interleave", "1.5",
    ]  # fmt: skip
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.output
    [config] = configs
    assert (config.prefill_step_size, config.draft_model) == (256, str(draft))
    assert config.prefill_interleave == 1.5
    assert (config.kv_bits, config.kv_group_size, config.max_kv_size) == (4, 32, 1024)
    assert (config.dtype, config.blas, config.prefix_cache_bytes) == ("float32", "openblas", 0)
    assert config.warm_prompts == str(warm)


def test_serve_refuses_openblas_when_it_is_not_installed(configs, tmp_path, openblas_at):
    openblas_at(None)
    result = CliRunner().invoke(cli.main, ["serve", str(tmp_path), "--blas", "openblas"])
    assert result.exit_code != 0 and "libopenblas0-pthread" in result.output
    assert configs == []


def test_serve_refuses_a_bad_warm_prompts_file_naming_the_line(configs, tmp_path):
    warm = tmp_path / "warm.jsonl"
    warm.write_text('"fine"\n{broken\n')
    result = CliRunner().invoke(cli.main, ["serve", str(tmp_path), "--warm-prompts", str(warm)])
    assert result.exit_code != 0 and "line 2" in result.output


def engine_setup(*flags: str):
    from worker.text.args import build_text_engine
    from worker.tiny_models import ensure_checkpoint

    return build_text_engine(
        parse_args(REQUIRED[2:] + ["--model", str(ensure_checkpoint("qwen3")), *flags])
    )


def finish(engine, request_id: str, prompt, max_tokens: int = 4):
    from protocol.inputs import CompleteInputs, SamplingParams
    from protocol.messages import Submit

    params = SamplingParams(max_tokens=max_tokens, temperature=0.0)
    delta = engine.admit(Submit(request_id, CompleteInputs(prompt, params), True))
    while delta.finish_reason is None:
        delta = next((d for d in engine.step() if d.finish_reason), delta)
    return delta


def test_dtype_casts_the_weights_at_load():
    import mlx.core as mx
    from mlx.utils import tree_flatten

    setup = engine_setup("--dtype", "float16")
    dtypes = {v.dtype for _, v in tree_flatten(setup.model.parameters())}
    assert dtypes == {mx.float16}


def test_warm_prompts_are_in_the_prefix_cache_before_the_first_request(tmp_path):
    warm = tmp_path / "warm.jsonl"
    system = "You are a careful assistant. " * 8
    warm.write_text(json.dumps(system) + "\n")
    setup = engine_setup("--warm-prompts", str(warm))
    done = finish(setup.engine, "r", system + "Hello there")
    assert done.usage.cached_tokens > 0


def test_the_ssd_tier_keeps_finished_requests_across_a_restart(tmp_path):
    prompt = "def main():\n    return 1\n" * 6
    first = engine_setup("--ssd-cache-dir", str(tmp_path))
    finish(first.engine, "r1", prompt)
    first.prefix.close()
    second = engine_setup("--ssd-cache-dir", str(tmp_path))
    assert finish(second.engine, "r2", prompt).usage.cached_tokens > 0
    second.prefix.close()


def test_a_zero_prefix_cache_budget_turns_the_cache_off():
    setup = engine_setup("--prefix-cache-bytes", "0")
    finish(setup.engine, "r1", "import os\n" * 5)
    assert finish(setup.engine, "r2", "import os\n" * 5).usage.cached_tokens == 0


def test_the_batch_engine_is_paced_by_default_and_by_the_flag():
    from worker.text.prefill_pacing import DEFAULT_RATIO

    assert engine_setup().engine._pacer.ratio == DEFAULT_RATIO
    assert engine_setup("--prefill-interleave", "0").engine._pacer.enabled is False
    assert engine_setup("--prefill-interleave", "2").engine._pacer.ratio == 2.0


def test_a_distributed_group_prefills_unpaced_and_refuses_pacing():
    from worker.text.args import prefill_pacer
    from worker.text.settings import GenerationSettings

    settings = GenerationSettings()
    assert prefill_pacer(None, settings, distributed=True).enabled is False
    assert prefill_pacer(0.0, settings, distributed=True).enabled is False
    with pytest.raises(ValueError, match="--prefill-interleave"):
        prefill_pacer(0.7, settings, distributed=True)
