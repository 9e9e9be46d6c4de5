"""`vllm-omni-mlx bench`: run the benchmark the options describe, print and save the results."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import click
import httpx

from gateway.cli.bench.report import table, write_csv, write_json
from gateway.cli.bench.runner import BenchConfig, run_bench


def progress_bar(enabled: bool, bars: list[Any]) -> Callable[[int], Callable[[], None]] | None:
    """A tqdm bar on stderr (tqdm comes with huggingface_hub); silent when not a terminal."""
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # the numbers do not depend on it
        return None

    def start(total: int) -> Callable[[], None]:
        bars.append(tqdm(total=total, file=sys.stderr, unit="req", disable=None, leave=False))
        return lambda: bars[-1].update(1)

    return start


def run(*, json_path: str | None, csv_path: str | None, progress: bool, **options: Any) -> None:
    config = BenchConfig(**options)
    bars: list[Any] = []
    try:
        report = asyncio.run(run_bench(config, progress_bar(progress, bars)))
    except (httpx.HTTPError, RuntimeError) as exc:
        raise click.ClickException(f"benchmark of {config.url} failed: {exc}") from exc
    finally:
        for bar in bars:
            bar.close()
    click.echo(table(report))
    if json_path:
        write_json(report, json_path)
    if csv_path:
        write_csv(report, csv_path)
