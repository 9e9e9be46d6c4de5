"""The distributed worker's pieces without a group: rank 0's Rounds on the wire, a scheduler
driven by them, the sharding choice, the launcher's command line and the CLI's refusals."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from gateway.cli import main as cli
from gateway.config import ServerConfig
from gateway.workers.distributed_worker import distributed_worker_command, launcher_arguments
from protocol.messages import ErrorCode, FinishReason
from tests.support.scheduler_fakes import Harness, submit
from worker.distributed.lockstep import Round, decode_round, encode_round
from worker.distributed.sharding import ShardingError, check_tensor_split, choose_mode
from worker.runtime.handoff import ShutdownRequest


def test_a_round_survives_the_wire():
    round_ = Round({"a", "b"}, [submit("r1"), submit("r2"), ShutdownRequest(9)], ["r0"])
    back = decode_round(encode_round(round_))
    assert back.aborted == {"a", "b"} and back.expired == ["r0"]
    assert [i.request_id for i in back.items[:2]] == ["r1", "r2"]
    assert back.items[0] == round_.items[0]
    assert isinstance(back.items[2], ShutdownRequest)  # other ranks reply to no one: call 0


class _Given:
    """A Lockstep that hands the scheduler fixed Rounds, as a rank other than 0 gets them."""

    def __init__(self, rounds: list[Round]) -> None:
        self.rounds = rounds

    def round(self, collect, idle=False):
        return self.rounds.pop(0) if self.rounds else Round(expired=[])


def test_a_follower_scheduler_expires_only_what_rank_0_expired():
    h = Harness(now=1000.0)
    given = _Given([Round(items=[submit("r1", deadline=1.0)], expired=[])])
    h.scheduler._lockstep = given
    [accepted] = h.step()  # its deadline passed long ago by this rank's clock: kept
    assert accepted.finish_reason is None
    given.rounds.append(Round(expired=["r1"]))
    [ended] = h.step()
    assert (ended.finish_reason, ended.error.code) == (FinishReason.ERROR, ErrorCode.DEADLINE)


def test_rank_0_decides_expiry_by_its_clock_before_sharing():
    h = Harness(now=1000.0)
    rounds = []

    class Leader:
        def round(self, collect, idle=False):
            rounds.append(collect())
            return rounds[-1]

    h.scheduler._lockstep = Leader()
    h.put(submit("r1", deadline=2000.0))
    h.step()
    h.now = 3000.0
    h.step()
    assert rounds[0].expired == [] and rounds[1].expired == ["r1"]


def test_an_engine_step_that_raises_ends_a_ranks_loop_not_just_its_requests():
    """A failed collective (a rank died) leaves no group to step on: the loop raises, so rank
    0 reports Fatal before any stream could end as if the worker were still whole."""
    h = Harness()
    h.scheduler._lockstep = _Given([Round(items=[submit("r1", max_tokens=5)], expired=[])])
    h.step()
    h.engine.fail_step = True
    with pytest.raises(RuntimeError, match="boom"):
        h.step()


class _Tensor:
    def shard(self, group): ...


class _Pipeline:
    model = SimpleNamespace(pipeline=lambda group: None)


def test_the_sharding_mode_is_the_one_mlx_lm_has_or_a_clear_error():
    assert choose_mode(_Tensor(), "auto", "llama") == "tensor"
    assert choose_mode(_Pipeline(), "auto", "deepseek_v3") == "pipeline"
    with pytest.raises(ShardingError, match="no pipeline parallelism for 'llama'"):
        choose_mode(_Tensor(), "pipeline", "llama")
    with pytest.raises(ShardingError, match="neither tensor nor pipeline"):
        choose_mode(object(), "auto", "gpt2")
    with pytest.raises(ShardingError, match="num_key_value_heads \\(3\\) divisible by 2"):
        check_tensor_split({"num_attention_heads": 6, "num_key_value_heads": 3}, 2)


def test_the_worker_runs_on_every_rank_through_mlx_launch():
    config = ServerConfig(model="/m", served_model_name="m", ranks=2, parallel="tensor")
    worker = [sys.executable, "-m", "worker", "--model", "/m"]
    argv = distributed_worker_command(config, worker)
    assert argv[:4] == [sys.executable, "-m", "worker.distributed.launcher", "--parent-pid"]
    launch = argv[argv.index("--") + 1 :]
    split = launch.index("--")
    assert launch[:4] == ["--hosts", "127.0.0.1", "-n", "2"]
    assert launch[split - 2 : split] == ["--python", sys.executable]
    assert launch[split + 1 :] == [
        "-m", "worker", "--model", "/m", "--distributed", "--parallel", "tensor",
    ]  # fmt: skip


def test_a_hostfile_and_a_backend_go_to_mlx_launch(tmp_path):
    config = ServerConfig(
        model="/m", served_model_name="m", distributed_hostfile="/h.json",
        distributed_backend="jaccl",
    )  # fmt: skip
    assert launcher_arguments(config) == [
        "--backend", "jaccl", "--hostfile", "/h.json", "--python", sys.executable,
    ]  # fmt: skip


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--ranks", "2", "--speech-model", "x"], "--speech-model does not go with a distributed"),
        (["--ranks", "2", "--ssd-cache-dir", "d"], "--ssd-cache-dir does not go with"),
        (["--ranks", "2", "--prefill-interleave", "1"], "--prefill-interleave (other than 0)"),
        (["--ranks", "2", "--omni"], "not --omni"),
        (["--parallel", "pipeline"], "--parallel needs --ranks N or --distributed HOSTFILE"),
        (["--ranks", "1"], "1 is not in the range x>=2"),
    ],
)
def test_serve_refuses_what_cannot_go_with_a_group(no_serving, tmp_path, flags, message):
    result = CliRunner().invoke(cli.main, ["serve", str(tmp_path), *flags])
    assert result.exit_code == 2 and message in result.output, result.output


def test_serve_checks_the_hostfile(no_serving, tmp_path):
    hostfile = tmp_path / "hosts.json"
    hostfile.write_text(json.dumps([{"ips": ["10.0.0.1"]}]))
    result = CliRunner().invoke(cli.main, ["serve", str(tmp_path), "--distributed", str(hostfile)])
    assert result.exit_code == 2 and 'host 0 has no "ssh" name' in result.output
    hostfile.write_text(json.dumps([{"ssh": "mac1", "ips": ["10.0.0.1"]}]))
    result = CliRunner().invoke(
        cli.main, ["serve", str(tmp_path), "--distributed", str(hostfile), "--parallel", "pipeline"]
    )
    assert result.exit_code == 0, result.output
    config = no_serving[0].config
    assert (config.distributed_hostfile, config.parallel) == (str(hostfile), "pipeline")


def test_ring_ports_are_picked_below_the_ephemeral_ranges():
    import socket

    from gateway.workers.distributed_worker import PORT_RANGE, free_port_run

    base = free_port_run(2)
    assert PORT_RANGE[0] <= base and base + 2 <= PORT_RANGE[1]
    for port in (base, base + 1):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))  # free
