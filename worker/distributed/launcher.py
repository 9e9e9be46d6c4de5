"""`python -m worker.distributed.launcher --parent-pid PID -- MLX.LAUNCH ARGS`: mlx.launch,
dying with the gateway.

The gateway starts a distributed worker through MLX's own launcher (mlx.launch: the ring
backend over TCP, JACCL over Thunderbolt RDMA, MPI, NCCL), which starts every rank (over ssh
for other hosts), forwards their output and stops them all when one fails. This wrapper only
adds the parent watchdog the plain worker has: the launcher dies with the gateway, and its
local ranks (which watch the launcher: worker/runtime/process.py) die with it.
"""

from __future__ import annotations

import os
import select
import sys

from worker.runtime.parent_watchdog import install_parent_watchdog


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[0] != "--parent-pid" or argv[2] != "--":
        sys.exit("usage: python -m worker.distributed.launcher --parent-pid PID -- ARGS")
    install_parent_watchdog(int(argv[1]))
    # mlx.launch forwards what it reads on stdin to every rank, polling it every 0.1 s; from
    # /dev/null (always readable) that poll would spin. A pipe no one writes to stays quiet.
    quiet, _keep_open = os.pipe()
    os.dup2(quiet, 0)
    from mlx._distributed_utils import launch

    # Each rank's thread in mlx.launch selects on the rank's stdin for writing with a 1 s
    # timeout; a pipe is always writable, so the thread would spin a core. Nothing is ever
    # written to the ranks' stdin (ours is quiet), so only their output is waited for.
    launch.select = lambda r, w, x, timeout=None: (*select.select(r, [], x, timeout)[:1], [], [])
    sys.argv = ["mlx.launch", *argv[3:]]
    launch.main()


if __name__ == "__main__":
    main(sys.argv[1:])
