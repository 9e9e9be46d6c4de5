"""The command line of a distributed worker: mlx.launch starting every rank of the group.

`serve MODEL --ranks N` starts N ranks on this host, `--distributed HOSTFILE` one rank per
host of an mlx.launch hostfile (the first host is this one: rank 0 speaks to the gateway over
the same local sockets as a plain worker). The launcher runs as
`python -m worker.distributed.launcher` (mlx.launch plus the parent watchdog); for the ring
backend on one host each start gets free ports, so a restarted group never waits for the old
group's ports. The worker's own flags follow, with `--distributed`.
"""

from __future__ import annotations

import os
import random
import socket
import sys

from gateway.config import ServerConfig

LAUNCHER_MODULE = "worker.distributed.launcher"


def is_distributed(config: ServerConfig) -> bool:
    return config.ranks is not None or config.distributed_hostfile is not None


def launcher_arguments(config: ServerConfig) -> list[str]:
    """mlx.launch's flags: which hosts, how many ranks each, which backend, which ports."""
    argv: list[str] = []
    if config.distributed_backend:
        argv += ["--backend", config.distributed_backend]
    if config.distributed_hostfile:
        argv += ["--hostfile", config.distributed_hostfile]
        if config.ranks:
            argv += ["-n", str(config.ranks)]
    else:
        argv += ["--hosts", "127.0.0.1", "-n", str(config.ranks)]
        argv += ["--starting-port", str(free_port_run(config.ranks or 1))]
    return [*argv, "--python", sys.executable]


def distributed_worker_command(config: ServerConfig, worker_argv: list[str]) -> list[str]:
    """`worker_argv` ([python, -m, worker, ...]) run on every rank through mlx.launch."""
    return [
        sys.executable, "-m", LAUNCHER_MODULE, "--parent-pid", str(os.getpid()), "--",
        *launcher_arguments(config), "--",
        *worker_argv[1:],  # the launcher puts its --python first
        "--distributed", "--parallel", config.parallel,
    ]  # fmt: skip


# Where the ring backend's ports are picked: below the kernels' ephemeral ranges (Linux
# 32768-60999, macOS and Windows 49152-65535), so that between this check and mlx.launch's
# bind the kernel does not hand the same port to another process's bind(0) or outgoing
# connection (it did once in a full test run: "[ring] Couldn't bind socket (error: 98)").
PORT_RANGE = (20000, 32000)


def free_port_run(count: int, attempts: int = 50) -> int:
    """A port P with P .. P + count - 1 all free on 127.0.0.1 now, from PORT_RANGE."""
    low, high = PORT_RANGE
    for _ in range(attempts):
        base = random.randrange(low, high - count)
        if all(_free(base + i) for i in range(count)):
            return base
    raise OSError(f"found no {count} consecutive free ports on 127.0.0.1 in {low}-{high}")


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
