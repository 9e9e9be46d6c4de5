"""Percentiles and summaries of the benchmark client (gateway.cli.bench.stats)."""

from __future__ import annotations

import pytest

from gateway.cli.bench.stats import percentile, summarize


def test_percentile_interpolates_linearly_between_ranks():
    values = [4.0, 1.0, 3.0, 2.0]  # unsorted on purpose
    assert percentile(values, 50) == pytest.approx(2.5)
    assert percentile(values, 95) == pytest.approx(3.85)
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0


def test_percentile_of_one_value_is_that_value():
    assert percentile([7.5], 99) == 7.5


def test_percentile_of_no_values_is_an_error():
    with pytest.raises(ValueError):
        percentile([], 50)


def test_percentile_outside_0_to_100_is_an_error():
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_summary_holds_mean_percentiles_and_extremes():
    summary = summarize([float(v) for v in range(1, 101)])
    assert summary is not None
    assert (summary.n, summary.mean, summary.min, summary.max) == (100, 50.5, 1.0, 100.0)
    assert summary.p50 == pytest.approx(50.5)
    assert summary.p99 == pytest.approx(99.01)


def test_summary_of_no_values_is_none():
    assert summarize([]) is None
