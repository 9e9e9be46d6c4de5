"""Type checks for `make lint`: mypy on the product's packages against a baseline that may only
shrink.

mypy runs with pyproject.toml's configuration (strict for `protocol` and `gateway.workers`,
which must stay clean). The errors it still reports elsewhere were recorded in
.mypy-baseline.txt (one line per error kind and place: count, file, code, message; no line
numbers, which move with every edit). The check fails when an error is new (not in the
baseline, or more of it than recorded), and when the baseline lists errors that are gone: the
baseline is then rewritten smaller with `--update`, which refuses to record new errors.

    python scripts/check_types.py            # the check (make lint)
    python scripts/check_types.py --update   # record fixed errors (never new ones)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / ".mypy-baseline.txt"
_ERROR = re.compile(
    r"^(?P<path>[^:\s]+\.py):\d+(?::\d+)?: error: (?P<message>.*?)(?:  \[(?P<code>[a-z-]+)\])?$"
)

Key = tuple[str, str, str]  # file, code, message


def run_mypy() -> tuple[Counter[Key], str]:
    """The errors mypy reports now, counted by key, and its whole output."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if done.returncode not in (0, 1):  # 2: mypy itself failed (a config or syntax error)
        raise SystemExit(f"mypy failed:\n{done.stdout}{done.stderr}")
    errors: Counter[Key] = Counter()
    for line in done.stdout.splitlines():
        match = _ERROR.match(line)
        if match:
            errors[(match["path"], match["code"] or "", match["message"])] += 1
    return errors, done.stdout


def read_baseline() -> Counter[Key]:
    recorded: Counter[Key] = Counter()
    if BASELINE.exists():
        for line in BASELINE.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                count, path, code, message = line.split("\t", 3)
                recorded[(path, code, message)] = int(count)
    return recorded


def write_baseline(errors: Counter[Key]) -> None:
    lines = [
        "# mypy errors not yet fixed: count, file, code, message (scripts/check_types.py).",
        "# It may only shrink: fix an error, then `python scripts/check_types.py --update`.",
    ]
    lines += [f"{n}\t{p}\t{c}\t{m}" for (p, c, m), n in sorted(errors.items())]
    BASELINE.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="record fixed errors")
    args = parser.parse_args(argv)
    now, output = run_mypy()
    recorded = read_baseline()
    new = now - recorded
    fixed = recorded - now
    if args.update and not BASELINE.exists():  # the first record: everything there is now
        write_baseline(now)
        print(f"baseline: {sum(now.values())} errors recorded in {BASELINE.name}")
        return 0
    if new:
        print("mypy reports errors the baseline does not have (fix them):")
        for line in output.splitlines():
            match = _ERROR.match(line)
            if match and (match["path"], match["code"] or "", match["message"]) in new:
                print(f"  {line}")
        return 1
    if args.update:
        write_baseline(now)
        print(f"baseline: {sum(now.values())} errors ({sum(fixed.values())} fixed ones dropped)")
        return 0
    if fixed:
        print(
            f"{sum(fixed.values())} errors of the baseline are fixed: record that with "
            "`python scripts/check_types.py --update` (the baseline may only shrink):"
        )
        for (path, code, message), count in sorted(fixed.items()):
            print(f"  {count} x {path} [{code}] {message}")
        return 1
    print(f"mypy: no new errors ({sum(now.values())} left in the baseline)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
