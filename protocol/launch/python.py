"""How the server starts Python processes: never with the current directory on `sys.path`.

`python -m worker` puts the current directory first on `sys.path`, so a `protocol.py`,
`worker.py` or `gateway.py` in the folder `serve` was started from would be imported instead of
the installed package. Python 3.11's `-P` leaves it out; on 3.10 a one-line bootstrap drops it
before running the module.
"""

from __future__ import annotations

import sys

_BOOTSTRAP = (
    "import runpy, sys; del sys.path[0], sys.argv[0]; "
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
)


def python_module(module: str) -> list[str]:
    """The argv that runs `python -m module` (append its arguments) without the current
    directory on `sys.path`."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module]
    return [sys.executable, "-c", _BOOTSTRAP, module]
