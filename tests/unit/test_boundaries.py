"""The process boundary and the package layering, checked on the source and on what loads.

- Nothing crosses between the gateway and the worker but `protocol/` and the leaf package
  `launch/`: the gateway never imports `worker`, the worker never imports `gateway`.
- The gateway never imports MLX or transformers, not even lazily inside a function; importing
  every gateway module loads none of them.
- `protocol/` depends on nothing of the project; `launch/` only on `protocol/`, with no MLX
  and no HTTP; the `bench` client on neither process; the converters (`convert/`) on nothing
  of the project, with no MLX and no HTTP.
Every `import` statement counts, wherever it stands (a lazy import inside a function too).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MLX = {"mlx", "mlx_lm", "mlx_vlm", "mlx_audio", "mlx_embeddings", "transformers"}
HTTP = {"starlette", "uvicorn", "httpx", "httpcore", "zmq"}
PROJECT = {"gateway", "worker", "protocol", "launch", "bench", "scripts", "tests", "convert"}

# package -> top-level names it may not import
FORBIDDEN = {
    "gateway": MLX | {"worker", "scripts", "tests"},
    "worker": {"gateway", "bench", "scripts", "tests"},
    "protocol": PROJECT - {"protocol"} | MLX | HTTP,
    "launch": PROJECT - {"protocol", "launch"} | MLX | HTTP,
    "bench": MLX | {"gateway", "worker", "launch", "scripts", "tests"},
    "convert": PROJECT - {"convert"} | MLX | HTTP,
}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, top-level module) of every absolute import in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_imports_nothing_it_may_not(package):
    offences = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, name in _imports(path)
        if name in FORBIDDEN[package]
    ]
    assert offences == []


def test_no_module_uses_a_relative_import_to_cross_a_package():
    # Relative imports would slip past the check above; the project uses none.
    relative = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for package in FORBIDDEN
        for path in sorted((ROOT / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.level > 0
    ]
    assert relative == []


def test_loading_every_gateway_module_loads_no_mlx_and_no_worker_code():
    modules = sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in (ROOT / "gateway").rglob("*.py")
    )
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(MLX | {'worker'})!r})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
