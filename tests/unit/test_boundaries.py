"""The process boundary and the package layering, checked on the source and on what loads.

- The installed product is three packages: `gateway`, `worker` and `protocol`; nothing crosses
  between the gateway and the worker but `protocol/`: the gateway never imports `worker`, the
  worker never imports `gateway`, and neither imports `scripts` or `tests` (never installed).
- The gateway never imports MLX or transformers, not even lazily inside a function; importing
  every gateway module loads none of them.
- `protocol/` depends on nothing of the project and has no MLX and no HTTP, its `launch/` (what
  both processes know about starting a worker) included; the `vllm-omni-mlx bench` client
  (`gateway/cli/bench/`) imports nothing of the project but itself; the converters
  (`worker/convert/`) nothing but `protocol/`, with no MLX and no HTTP, but for the one converter
  that builds mlx-audio's Kokoro model to name and shape the weights it writes (it runs in the
  converting process, `python -m worker.convert`, never in the gateway's).
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
PROJECT = {"gateway", "worker", "protocol", "scripts", "tests"}

# folder -> the modules it may not import (a name forbids its submodules too)
FORBIDDEN = {
    "gateway": MLX | {"worker", "scripts", "tests"},
    "worker": {"gateway", "scripts", "tests"},
    "protocol": PROJECT - {"protocol"} | MLX | HTTP,
    "gateway/cli/bench": PROJECT - {"gateway"} | MLX | {"gateway." + name for name in (
        "api", "app", "audio", "chat", "cli.main", "config", "engine", "generation", "http",
        "media", "metrics", "openai", "openapi", "playground", "pool", "realtime", "routes",
        "schema",
    )},
    "worker/convert": PROJECT - {"worker", "protocol"} | MLX | HTTP | {
        "worker." + name for name in ("text", "speech", "runtime", "vision", "embedding")
    },
}  # fmt: skip
# file -> the forbidden names it may import, each with its reason in the module docstring above
EXCEPTIONS = {"worker/convert/from_kokoro_onnx.py": {"mlx", "mlx_audio"}}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def _forbidden(name: str, forbidden: set[str]) -> str | None:
    """The entry of `forbidden` that `name` is or is inside of."""
    parts = name.split(".")
    return next((".".join(parts[:n]) for n in range(1, len(parts) + 1)
                 if ".".join(parts[:n]) in forbidden), None)  # fmt: skip


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_imports_nothing_it_may_not(package):
    offences = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, name in _imports(path)
        if (hit := _forbidden(name, FORBIDDEN[package])) is not None
        and hit not in EXCEPTIONS.get(str(path.relative_to(ROOT)), ())
    ]
    assert offences == []


def test_the_wheel_holds_the_three_product_packages_only():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert found["packages"]["find"]["include"] == ["gateway*", "worker*", "protocol*"]
    assert sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()) == sorted(
        ["gateway", "worker", "protocol", "scripts", "tests"]
    )


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
