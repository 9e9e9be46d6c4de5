"""Takes the web playground's screenshots in docs/playground/ again: runs the browser tests
(tests/browser/, headless Chromium against a real server on tiny checkpoints), which save
what they check as PNGs when VOMLX_PLAYGROUND_SCREENSHOTS names a folder.

    python -m scripts.playground_screenshots [--out docs/playground]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "playground")
    args = parser.parse_args()
    env = {**os.environ, "VOMLX_PLAYGROUND_SCREENSHOTS": str(args.out.resolve())}
    env.setdefault("VOMLX_CACHE_DIR", str(ROOT / ".cache" / "checkpoints"))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/browser"]
    result = subprocess.run(command, cwd=ROOT, env=env)
    if result.returncode == 0:
        for png in sorted(args.out.glob("*.png")):
            print(png.relative_to(ROOT) if png.is_relative_to(ROOT) else png)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
