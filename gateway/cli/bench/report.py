"""A benchmark's results as rows (one per level, plus one per turn of multi-turn levels),
printed as a table and written as JSON or CSV. Times are seconds in files, ms in the table.
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gateway.cli.bench.runner import BenchReport, LevelRun, RequestRecord
from gateway.cli.bench.stats import Summary, summarize

METRICS = ("ttft_s", "itl_s", "e2e_s", "decode_tok_s")
STATS = ("mean", "p50", "p95", "p99")


@dataclass(frozen=True)
class Row:
    """One level (turn "all") or one turn of a multi-turn level."""

    concurrency: int
    turn: str
    requests: int
    errors: int
    duration_s: float | None  # the level's wall time; per-turn rows have none
    output_tokens: int
    aggregate_tok_s: float | None  # output tokens of the level over its wall time
    prompt_tokens_mean: float | None
    ttft_s: Summary | None
    itl_s: Summary | None
    e2e_s: Summary | None
    decode_tok_s: Summary | None


def _row(level: LevelRun, turn: str, records: list[RequestRecord]) -> Row:
    ok = [r.result for r in records if r.result.ok]
    output = sum(r.completion_tokens for r in ok)
    prompts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    whole = turn == "all"
    return Row(
        concurrency=level.concurrency,
        turn=turn,
        requests=len(records),
        errors=len(records) - len(ok),
        duration_s=level.duration if whole else None,
        output_tokens=output,
        aggregate_tok_s=output / level.duration if whole and level.duration > 0 else None,
        prompt_tokens_mean=sum(prompts) / len(prompts) if prompts else None,
        ttft_s=summarize([r.ttft for r in ok if r.ttft is not None]),
        itl_s=summarize([gap for r in ok for gap in r.itl]),
        e2e_s=summarize([r.e2e for r in ok]),
        decode_tok_s=summarize([t for r in ok if (t := r.decode_tok_s) is not None]),
    )


def rows(report: BenchReport) -> list[Row]:
    out = []
    for level in report.levels:
        out.append(_row(level, "all", level.records))
        if report.config.turns > 1:
            for turn in range(1, report.config.turns + 1):
                turn_records = [r for r in level.records if r.turn == turn]
                out.append(_row(level, str(turn), turn_records))
    return out


def _ms(summary: Summary | None, stat: str) -> str:
    return f"{getattr(summary, stat) * 1000:.1f}" if summary else "-"


def _num(value: float | None, digits: int = 1) -> str:
    return f"{value:.{digits}f}" if value is not None else "-"


def table(report: BenchReport) -> str:
    """A fixed-width table for the terminal."""
    header = (
        "conc", "turn", "ok/err", "prompt", "out tok", "agg tok/s", "TTFT p50", "p95", "p99",
        "ITL p50", "p95", "p99", "E2E p50", "p99", "dec tok/s",
    )  # fmt: skip
    lines = [header]
    for row in rows(report):
        lines.append((
            str(row.concurrency), row.turn, f"{row.requests - row.errors}/{row.errors}",
            _num(row.prompt_tokens_mean, 0), str(row.output_tokens), _num(row.aggregate_tok_s),
            _ms(row.ttft_s, "p50"), _ms(row.ttft_s, "p95"), _ms(row.ttft_s, "p99"),
            _ms(row.itl_s, "p50"), _ms(row.itl_s, "p95"), _ms(row.itl_s, "p99"),
            _ms(row.e2e_s, "p50"), _ms(row.e2e_s, "p99"),
            _num(row.decode_tok_s.p50 if row.decode_tok_s else None),
        ))  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True))
        for line in lines
    ]
    config = report.config
    prompt = f"prompt ~{config.prompt_tokens} tok"
    if config.turns > 1:
        first = config.history_tokens or config.prompt_tokens
        prompt = f"turns {config.turns}: first ~{first} tok, then +~{config.prompt_tokens} tok"
    title = (
        f"model {report.model} | {config.endpoint} | {prompt} | max_tokens {config.max_tokens}"
        f" | seed {report.seed} | times in ms"
    )
    return "\n".join([title, *text, *(f"warning: {w}" for w in report.warnings)])


def to_json(report: BenchReport) -> dict[str, Any]:
    """Everything: the config, the summaries and every request's own numbers."""
    return {
        "config": {**asdict(report.config), "concurrency": list(report.config.concurrency)},
        "model": report.model,
        "seed": report.seed,
        "calibration": asdict(report.calibration),
        "warnings": report.warnings,
        "rows": [asdict(row) for row in rows(report)],
        "requests": [
            {
                "concurrency": r.concurrency,
                "conversation": r.conversation,
                "turn": r.turn,
                "ok": r.result.ok,
                "error": r.result.error,
                "ttft_s": r.result.ttft,
                "e2e_s": r.result.e2e,
                "decode_tok_s": r.result.decode_tok_s,
                "prompt_tokens": r.result.prompt_tokens,
                "completion_tokens": r.result.completion_tokens,
                "tokens_from_usage": r.result.tokens_from_usage,
                "chunks": len(r.result.token_times),
                "finish_reason": r.result.finish_reason,
            }
            for level in report.levels
            for r in level.records
        ],
    }


def write_json(report: BenchReport, path: str | Path) -> None:
    Path(path).write_text(json.dumps(to_json(report), indent=2) + "\n")


def csv_fields() -> list[str]:
    flat = [f"{metric}_{stat}" for metric in METRICS for stat in STATS]
    return ["concurrency", "turn", "requests", "errors", "duration_s", "output_tokens",
            "aggregate_tok_s", "prompt_tokens_mean", *flat]  # fmt: skip


def write_csv(report: BenchReport, path: str | Path) -> None:
    """One line per row; a metric with no values leaves its cells empty."""
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=csv_fields())
        writer.writeheader()
        for row in rows(report):
            line: dict[str, Any] = {k: v for k, v in asdict(row).items() if k not in METRICS}
            for metric in METRICS:
                summary: Summary | None = getattr(row, metric)
                for stat in STATS:
                    line[f"{metric}_{stat}"] = getattr(summary, stat) if summary else ""
            writer.writerow({k: "" if v is None else v for k, v in line.items()})
