"""The `bench` command's click options, kept here so `gateway/cli/main.py` stays one line per command.

Importing this module imports click only; the benchmark itself loads when the command runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def parse_levels(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    """`1,2,4,8` -> (1, 2, 4, 8); every level a positive integer."""
    try:
        levels = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of integers") from None
    if not levels or min(levels) < 1:
        raise click.BadParameter("levels must be positive integers")
    return levels


OPTIONS = [
    click.option("--url", default="http://127.0.0.1:8000", show_default=True,
                 help="Base URL of any OpenAI-compatible server."),
    click.option("--api-key", envvar="VOMLX_API_KEY", help="Sent as a Bearer token."),
    click.option("--model", default="auto", show_default=True,
                 help="Model id; auto: the first one /v1/models lists."),
    click.option("--endpoint", type=click.Choice(["chat", "completions"]), default="chat",
                 show_default=True),
    click.option("--prompt-tokens", type=click.IntRange(min=1), default=512, show_default=True,
                 help="Prompt size (later turns: size of each new user message)."),
    click.option("--max-tokens", type=click.IntRange(min=1), default=128, show_default=True),
    click.option("--concurrency", default="1", show_default=True, callback=parse_levels,
                 help="Comma-separated levels of requests in flight, e.g. 1,2,4,8."),
    click.option("--requests", type=click.IntRange(min=1),
                 help="Conversations per level [default: 2 x concurrency]."),
    click.option("--turns", type=click.IntRange(min=1), default=1, show_default=True,
                 help="Requests per conversation, each carrying the history so far."),
    click.option("--history-tokens", type=click.IntRange(min=1),
                 help="Size of turn 1's prompt when --turns > 1 [default: --prompt-tokens]."),
    click.option("--warmup", type=click.IntRange(min=0), default=1, show_default=True,
                 help="Unmeasured requests first."),
    click.option("--seed", type=int, help="Prompt text seed [default: random, reported]."),
    click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=600.0,
                 show_default=True, help="Seconds a request may take."),
    click.option("--json", "json_path", type=click.Path(dir_okay=False),
                 help="Write every number (and every request's) as JSON here."),
    click.option("--csv", "csv_path", type=click.Path(dir_okay=False),
                 help="Write the table's rows as CSV here."),
    click.option("--progress/--no-progress", default=True, show_default=True,
                 help="Progress bar on stderr (only when it is a terminal)."),
]  # fmt: skip


def bench_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(OPTIONS):
        command = option(command)
    return command
