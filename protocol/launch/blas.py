"""Which BLAS the worker's float32 matmuls run on, on Linux: the wheel's or a system OpenBLAS.

The mlx-cpu wheel links the netlib *reference* BLAS: float32 matmul runs ~30x slower than with
OpenBLAS. Preloading a system OpenBLAS (Debian/Ubuntu: `apt-get install libopenblas0-pthread`)
into the worker process makes MLX's BLAS calls resolve to it. `LD_PRELOAD` is read by the
dynamic loader when a process starts, so the gateway sets it in the worker's environment
(`worker_env`); the worker checks at start what it really got (`loaded_openblas`).

Modes (`--blas`): "auto" preloads OpenBLAS when it is installed (Linux only), "bundled" never
does, "openblas" requires it (the worker refuses to start without it). On macOS MLX uses
Accelerate (and Metal) and this module does nothing.

OpenBLAS's own thread settings are left as they are (one thread per core; after a call its
threads wait 2^28 cycles before sleeping): the environment's OPENBLAS_NUM_THREADS and
OPENBLAS_THREAD_TIMEOUT reach the worker unchanged. A short timeout (2^4 cycles, the default
here until 2026-12-02) put the helper thread to sleep between a step's matmuls and cost 7%
of single-stream decode on SmolLM2-135M and 20% on the 20M checkpoint, 4-13% at 8 streams
(docs/benchmarks.md, "OpenBLAS threads").

Standard library only: the gateway imports it, and the gateway never imports MLX.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Mapping

MODES = ("auto", "bundled", "openblas")
_LIBRARY = "libopenblas.so.0"
_MULTIARCH = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}
# How `ldconfig -p` names the architectures: "(libc6,x86-64)", "(libc6,AArch64)".
_LDCONFIG_ARCH = {"x86_64": "x86-64", "aarch64": "AArch64"}


class BlasUnavailable(RuntimeError):
    """--blas openblas, but no OpenBLAS can be preloaded here."""


def find_openblas() -> str | None:
    """The system OpenBLAS library to preload, or None (also None off Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    machine = platform.machine()
    multiarch = _MULTIARCH.get(machine)
    candidates = [f"/usr/lib/{multiarch}/{_LIBRARY}"] if multiarch else []
    candidates += [f"/usr/lib64/{_LIBRARY}", f"/usr/lib/{_LIBRARY}"]
    for path in candidates:
        if os.path.exists(path):
            return path
    return _from_ldconfig(_LDCONFIG_ARCH.get(machine))


def _from_ldconfig(arch: str | None) -> str | None:
    try:
        listing = subprocess.run(
            ["ldconfig", "-p"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in listing.splitlines():
        name, _, path = line.strip().partition(" => ")
        if name.startswith(_LIBRARY) and (arch is None or arch in name) and os.path.exists(path):
            return path
    return None


def blas_environment(mode: str, env: Mapping[str, str]) -> dict[str, str]:
    """`env` with LD_PRELOAD set for `mode`; raises BlasUnavailable for "openblas" when there
    is none to preload."""
    if mode not in MODES:
        raise ValueError(f"unknown BLAS mode {mode!r} ({', '.join(MODES)})")
    result = dict(env)
    inherited = [p for p in result.get("LD_PRELOAD", "").replace(":", " ").split() if p]
    if mode == "bundled":
        kept = [p for p in inherited if "libopenblas" not in os.path.basename(p)]
        _set_preload(result, kept)
        return result
    library = find_openblas()
    if library is None:
        if mode == "openblas":
            raise BlasUnavailable(
                "--blas openblas: no OpenBLAS library found (Linux only; on Debian/Ubuntu: "
                "apt-get install libopenblas0-pthread)"
            )
        return result
    if library not in inherited:
        inherited.append(library)
    _set_preload(result, inherited)
    return result


def _set_preload(env: dict[str, str], libraries: list[str]) -> None:
    if libraries:
        env["LD_PRELOAD"] = " ".join(libraries)
    else:
        env.pop("LD_PRELOAD", None)


def loaded_openblas() -> str | None:
    """The OpenBLAS library mapped into this process, or None (also None off Linux)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rsplit(" ", 1)[-1].strip()
                if "libopenblas" in os.path.basename(path):
                    return path
    except OSError:
        return None
    return None


def describe(mode: str) -> str:
    """One line for the worker's log: which BLAS this process uses."""
    library = loaded_openblas()
    if library is not None:
        return f"BLAS: OpenBLAS ({library}), --blas {mode}"
    if sys.platform.startswith("linux"):
        return (
            f"BLAS: the mlx wheel's reference BLAS (slow float32 matmul), --blas {mode}; "
            "install libopenblas0-pthread and use --blas auto for ~30x faster float32"
        )
    return f"BLAS: the platform's (--blas {mode} has no effect here)"
