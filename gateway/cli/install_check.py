"""Are the `gateway`, `worker` and `protocol` this process would import vllm-omni-mlx's own,
from one install? Run by the console script before anything else is imported (entry.py).

The three names are generic: another distribution's `protocol` installed over ours, a stale
copy in another site directory, or a `worker.py` in a folder on `sys.path` would be imported
instead and fail far from the cause. Each of our three `__init__.py` says
`__distribution__ = "vllm-omni-mlx"`; the three must sit side by side, and the installed
distribution's version must be the one `protocol/__init__.py` states. Only the standard library
is used here, and the packages' files are read, not imported.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from pathlib import Path

DISTRIBUTION = "vllm-omni-mlx"
PACKAGES = ("gateway", "worker", "protocol")
_MARKER = f'__distribution__ = "{DISTRIBUTION}"'


def foreign_package() -> str | None:
    """None when all is well; else one line naming the file that is not ours."""
    folders = {}
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        origin = Path(spec.origin) if spec is not None and spec.origin else None
        if origin is None:
            return f"no `{name}` package is installed: reinstall {DISTRIBUTION}"
        if origin.name != "__init__.py" or _MARKER not in origin.read_text(errors="replace"):
            return (
                f"{origin} is imported as `{name}` but is not {DISTRIBUTION}'s (another "
                f"package or file of that name comes first on sys.path): remove or rename it"
            )
        folders[name] = origin.parent.parent
    if len(set(folders.values())) > 1:
        where = ", ".join(f"{name} from {folder}" for name, folder in folders.items())
        return f"{DISTRIBUTION}'s packages come from different installs ({where}): reinstall it"
    stated = re.search(r'^__version__ = "([^"]+)"', _read(folders["protocol"] / "protocol"), re.M)
    try:
        installed = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None  # run from a source tree that is not installed: nothing to compare
    if stated is None or stated.group(1) != installed:
        return (
            f"{folders['protocol'] / 'protocol' / '__init__.py'} is version "
            f"{stated.group(1) if stated else '?'} but {DISTRIBUTION} {installed} is installed: "
            "reinstall it"
        )
    return None


def _read(package: Path) -> str:
    return (package / "__init__.py").read_text(errors="replace")
