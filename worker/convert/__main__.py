"""`python -m worker.convert SRC OUT [...]`: what `vllm-omni-mlx convert` runs (gateway/cli/
convert.py parses the command line and runs this in a process of its own, since converting
loads numpy, gguf, tokenizers, onnx and, for Kokoro, MLX). Exit status 1 with one line on
stderr when SRC cannot be converted."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from worker.convert.errors import ConversionError
from worker.convert.output import new_staging_directory, publish
from worker.convert.sources import convert_source


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m worker.convert")
    parser.add_argument("src", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--dtype", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--part", dest="parts", action="append", type=Path, default=[])
    parser.add_argument("--vocab", type=Path)
    parser.add_argument("--voices", type=Path)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    if out.exists() and not args.force:
        print(f"error: {args.out} exists (use --force to replace it)", file=sys.stderr)
        return 1
    started = time.perf_counter()
    staging = new_staging_directory(out)
    try:
        summary = convert_source(
            args.src, staging, args.dtype, tuple(args.parts), args.vocab, args.voices
        )
        publish(staging, out, replace=args.force)
    except ConversionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    elapsed = time.perf_counter() - started
    print(
        f"{args.src} -> {args.out} ({summary.kind}, {summary.parameters / 1e6:.1f}M parameters, "
        f"{summary.dtype}, {elapsed:.1f} s)",
        file=sys.stderr,
    )
    for line in summary.details:
        print(f"  {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
