"""Workers on other hosts, what is testable without processes: the key files' layout, the
`tcp://` addresses, the host messages' wire layout, and the gateway's RemoteHost / RemoteWorker
(the supervisor's spawn and exit for a remote worker) against a fake channel."""

from __future__ import annotations

import asyncio
import stat
import time

import msgpack
import pytest
from click.testing import CliRunner

from gateway.cli.main import main as cli
from gateway.workers.errors import LaunchError
from gateway.workers.remote_worker import RemoteHost
from gateway.workers.worker_channel import CurveClientKeys
from protocol import decode, encode
from protocol.endpoints import BadAddress, Endpoints, parse_tcp
from protocol.host import HostAction, HostCommand, HostEvent, HostEventKind, frame_tag
from protocol.launch.curve_keys import KeysError, gateway_keys, host_keys
from protocol.messages import Heartbeat, Tag
from tests.support.engine_harness import async_test

# -- keys ----------------------------------------------------------------------------------


def test_keys_makes_a_pair_per_side_each_side_holding_only_its_own_secret(tmp_path):
    run = CliRunner().invoke(cli, ["keys", str(tmp_path / "k")])
    assert run.exit_code == 0, run.output
    root = tmp_path / "k"
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == [
        "gateway/client.key", "gateway/client.key_secret", "gateway/server.key",
        "host/clients/client.key", "host/server.key", "host/server.key_secret",
    ]  # fmt: skip
    for secret in ("gateway/client.key_secret", "host/server.key_secret"):
        assert stat.S_IMODE((root / secret).stat().st_mode) == 0o600
    assert (root / "gateway/server.key").read_bytes() == (root / "host/server.key").read_bytes()
    # Each side takes its own directory, or the whole one.
    assert gateway_keys(root) == gateway_keys(root / "gateway")
    assert host_keys(root) == host_keys(root / "host")
    keys = CurveClientKeys.load(str(root / "gateway"))
    assert len(keys.public) == len(keys.secret) == len(keys.server_public) == 40
    again = CliRunner().invoke(cli, ["keys", str(root)])
    assert again.exit_code != 0 and "never overwritten" in again.output


def test_a_keys_directory_without_its_files_is_refused_naming_the_file(tmp_path):
    with pytest.raises(KeysError, match="client.key_secret is missing"):
        gateway_keys(tmp_path)
    with pytest.raises(KeysError, match="server.key_secret is missing"):
        host_keys(tmp_path)
    CliRunner().invoke(cli, ["keys", str(tmp_path / "k")])
    for key in (tmp_path / "k/host/clients").iterdir():
        key.unlink()
    with pytest.raises(KeysError, match="no gateway public key"):
        host_keys(tmp_path / "k/host")


def test_the_worker_command_refuses_plain_tcp_without_insecure_and_bad_addresses():
    run = CliRunner().invoke(cli, ["worker", "--listen", "tcp://127.0.0.1:7070", "/m"])
    assert run.exit_code != 0 and "--insecure" in run.output
    run = CliRunner().invoke(cli, ["worker", "--listen", "http://h:1", "--insecure", "/m"])
    assert run.exit_code != 0 and "not tcp://HOST:PORT" in run.output


# -- addresses -----------------------------------------------------------------------------


def test_a_worker_host_address_is_tcp_host_port_and_uses_port_plus_one():
    assert parse_tcp("tcp://gpu-box:7070") == ("gpu-box", 7070)
    assert parse_tcp("tcp://[::1]:80") == ("[::1]", 80)
    assert Endpoints.tcp("tcp://10.0.0.2:7070") == Endpoints(
        "tcp://10.0.0.2:7070", "tcp://10.0.0.2:7071"
    )
    for bad in ("tcp://h", "ipc:///x", "tcp://h:0", "tcp://h:65535", "tcp://a b:1"):
        with pytest.raises(BadAddress):
            parse_tcp(bad)


# -- the host messages ---------------------------------------------------------------------


def test_the_host_messages_layout_and_their_tags_read_without_decoding():
    command = encode(HostCommand(HostAction.START, 3, 1234))
    assert msgpack.unpackb(command) == [8, "start", 3, 1234]
    event = encode(HostEvent(HostEventKind.EXITED, 0, 77, "exited with code 1"))
    assert msgpack.unpackb(event) == [24, "exited", 0, 77, "exited with code 1"]
    assert decode(event) == HostEvent(HostEventKind.EXITED, 0, 77, "exited with code 1")
    assert frame_tag(command) == 8 and frame_tag(event) == 24
    assert frame_tag(encode(Heartbeat(1.0, 0, 0))) == Tag.HEARTBEAT
    assert frame_tag(b"") is None and frame_tag(b"\xc0\x01") is None
    assert not {8, 24} & {int(t) for t in Tag}


# -- RemoteHost / RemoteWorker -------------------------------------------------------------


class FakeChannel:
    def __init__(self, connected: bool = True, refused: str | None = None) -> None:
        self.sent: list = []
        self.last_seen = time.monotonic()
        self.connected = connected
        self.refused = refused

    def send_nowait(self, message) -> bool:
        if not self.connected:
            return False
        self.sent.append(message)
        return True

    def handshake_failure(self) -> str | None:
        return self.refused


async def _started(host: RemoteHost, channel: FakeChannel, pid: int) -> None:
    while not channel.sent:
        await asyncio.sleep(0.01)
    host.on_event(HostEvent(HostEventKind.STARTED, channel.sent[-1].generation, pid))


@async_test
async def test_spawn_asks_the_host_to_start_and_an_exit_it_reports_ends_the_worker():
    channel = FakeChannel()
    host = RemoteHost("tcp://h:1", channel)  # type: ignore[arg-type]
    worker, _ = await asyncio.gather(host.spawn(5, 60), _started(host, channel, 42))
    assert worker.pid == 42 and channel.sent == [HostCommand(HostAction.START, 1, 0)]
    host.on_event(HostEvent(HostEventKind.EXITED, 0, 41, "exited with code 1"))  # another
    assert not worker.exited.done()
    host.on_event(HostEvent(HostEventKind.EXITED, 0, 42, "was killed by signal 9 (SIGKILL)"))
    assert await worker.wait() == 0
    assert worker.describe_exit() == "worker pid 42 on tcp://h:1 was killed by signal 9 (SIGKILL)"
    # The next start names the worker it replaces; a stale `started` is ignored.
    channel.sent.clear()
    host.on_event(HostEvent(HostEventKind.STARTED, 1, 50))
    second, _ = await asyncio.gather(host.spawn(5, 60), _started(host, channel, 43))
    assert second.pid == 43 and channel.sent[0].replace_pid == 42


@async_test
async def test_kill_asks_the_host_to_stop_and_counts_the_worker_gone_at_once():
    channel = FakeChannel()
    host = RemoteHost("tcp://h:1", channel)  # type: ignore[arg-type]
    worker, _ = await asyncio.gather(host.spawn(5, 60), _started(host, channel, 7))
    await worker.kill_and_wait()  # even when the stop cannot arrive (a network drop)
    assert channel.sent[-1].action == HostAction.STOP and worker.exited.done()


@async_test
async def test_a_refused_handshake_is_not_retried_and_a_silent_host_is():
    refused = RemoteHost("tcp://h:1", FakeChannel(refused="a wrong key"))  # type: ignore[arg-type]
    with pytest.raises(LaunchError, match="refused the connection: a wrong key") as caught:
        await refused.spawn(5, 60)
    assert caught.value.retry is False
    silent = RemoteHost("tcp://h:1", FakeChannel(connected=False))  # type: ignore[arg-type]
    with pytest.raises(LaunchError, match=r"did not answer within 0.2 s \(no connection\)") as c:
        await silent.spawn(0.2, 60)
    assert c.value.retry is True


@async_test
async def test_a_silent_link_ends_the_worker_even_while_it_loads():
    channel = FakeChannel()
    host = RemoteHost("tcp://h:1", channel)  # type: ignore[arg-type]
    worker, _ = await asyncio.gather(host.spawn(5, 0.3), _started(host, channel, 9))
    channel.last_seen = time.monotonic()  # the host's `loading` events keep it alive...
    await asyncio.sleep(0.2)
    assert not worker.exited.done()
    await asyncio.wait_for(worker.wait(), 1.0)  # ...until they stop
    assert "sent nothing for" in worker.describe_exit()
    assert channel.sent[-1].action == HostAction.STOP
