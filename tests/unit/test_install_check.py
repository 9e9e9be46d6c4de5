"""The console script's start-up check (gateway/cli/install_check.py): the `gateway`, `worker`
and `protocol` it would import are vllm-omni-mlx's, from one install; if not, one line names
the file that is not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECK = "from gateway.cli.install_check import foreign_package; print(foreign_package())"


def _check(first_on_path: Path | None = None) -> str:
    path = [str(first_on_path)] if first_on_path else []
    code = f"import sys; sys.path[:0] = {path!r}; {CHECK}"
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_installed_packages_pass():
    assert _check() == "None"


def test_a_module_of_the_same_name_first_on_the_path_is_named(tmp_path):
    (tmp_path / "protocol.py").write_text("raise SystemExit('the wrong protocol')\n")
    line = _check(tmp_path)
    assert line.startswith(f"{tmp_path / 'protocol.py'} is imported as `protocol`")


def test_another_distributions_package_of_the_same_name_is_named(tmp_path):
    (tmp_path / "worker").mkdir()
    (tmp_path / "worker" / "__init__.py").write_text('"""Someone else\'s worker."""\n')
    line = _check(tmp_path)
    assert str(tmp_path / "worker" / "__init__.py") in line and "not vllm-omni-mlx's" in line


def test_our_packages_from_two_installs_are_refused(tmp_path):
    (tmp_path / "worker").mkdir()
    (tmp_path / "worker" / "__init__.py").write_text((ROOT / "worker" / "__init__.py").read_text())
    line = _check(tmp_path)
    assert "different installs" in line and f"worker from {tmp_path}" in line


def test_the_console_script_stops_with_that_one_line(tmp_path):
    (tmp_path / "worker.py").write_text("")
    cli = Path(sys.executable).with_name("vllm-omni-mlx")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([str(cli), "--help"], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: {tmp_path / 'worker.py'} is imported as `worker` but is not vllm-omni-mlx's "
        "(another package or file of that name comes first on sys.path): remove or rename it"
    ]
