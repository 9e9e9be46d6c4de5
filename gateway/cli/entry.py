"""The `vllm-omni-mlx` console script: check that the installed packages are ours
(install_check.py), then run the command group (main.py)."""

from __future__ import annotations

import sys

from gateway.cli.install_check import foreign_package


def main() -> None:
    problem = foreign_package()
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    from gateway.cli.main import main as commands

    commands()
