"""Rows, table, JSON and CSV of a benchmark report (gateway.cli.bench.report), from made-up runs."""

from __future__ import annotations

import csv
import json

import pytest

from gateway.cli.bench.client import RequestResult
from gateway.cli.bench.prompts import Calibration
from gateway.cli.bench.report import csv_fields, rows, table, write_csv, write_json
from gateway.cli.bench.runner import BenchConfig, BenchReport, LevelRun, RequestRecord


def result(ttft: float, times: list[float], tokens: int, error: str | None = None):
    return RequestResult(
        start=100.0,
        end=100.0 + times[-1] + 0.01,
        ttft=ttft,
        token_times=times,
        prompt_tokens=500,
        completion_tokens=tokens,
        tokens_from_usage=True,
        error=error,
    )


def report(turns: int = 1) -> BenchReport:
    records = [
        RequestRecord(2, 0, 1, result(0.5, [0.5, 0.6, 0.7], 5)),
        RequestRecord(2, 1, 1, result(0.3, [0.3, 0.5], 3)),
        RequestRecord(2, 2, 1, result(0.3, [0.3], 1, error="HTTP 503: busy")),
    ]
    if turns > 1:
        records[1].turn = 2
    config = BenchConfig(concurrency=(2,), turns=turns)
    return BenchReport(config, "m", 1, Calibration(5.0, 1.5), [LevelRun(2, 2.0, records)])


def test_a_level_row_counts_tokens_of_successful_requests_over_its_wall_time():
    (row,) = rows(report())
    assert (row.requests, row.errors, row.output_tokens) == (3, 1, 8)
    assert row.aggregate_tok_s == pytest.approx(4.0)
    assert row.ttft_s.p50 == pytest.approx(0.4)


def test_decode_rate_excludes_the_first_token():
    (row,) = rows(report())
    # (5 - 1) tokens in 0.2 s and (3 - 1) in 0.2 s
    assert sorted([row.decode_tok_s.min, row.decode_tok_s.max]) == pytest.approx([10.0, 20.0])


def test_inter_token_latencies_are_gaps_between_text_chunks():
    (row,) = rows(report())
    assert row.itl_s.n == 3
    assert row.itl_s.max == pytest.approx(0.2)


def test_multi_turn_levels_get_a_row_per_turn_without_an_aggregate():
    level, turn1, turn2 = rows(report(turns=2))
    assert (level.turn, turn1.turn, turn2.turn) == ("all", "1", "2")
    assert (turn1.requests, turn2.requests) == (2, 1)
    assert turn1.aggregate_tok_s is None and level.aggregate_tok_s is not None


def test_table_has_a_title_a_header_and_a_line_per_row():
    lines = table(report(turns=2)).splitlines()
    assert lines[0].startswith("model m")
    assert "TTFT p50" in lines[1]
    assert len(lines) == 2 + 3


def test_json_holds_rows_and_every_request(tmp_path):
    path = tmp_path / "r.json"
    write_json(report(), path)
    data = json.loads(path.read_text())
    assert data["rows"][0]["output_tokens"] == 8
    assert [r["ok"] for r in data["requests"]] == [True, True, False]
    assert data["config"]["concurrency"] == [2]


def test_csv_has_one_line_per_row_and_empty_cells_for_missing_values(tmp_path):
    path = tmp_path / "r.csv"
    write_csv(report(turns=2), path)
    with open(path) as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == csv_fields()
        lines = list(reader)
    assert [line["turn"] for line in lines] == ["all", "1", "2"]
    assert lines[1]["aggregate_tok_s"] == ""
    assert float(lines[0]["ttft_s_p50"]) == pytest.approx(0.4)
