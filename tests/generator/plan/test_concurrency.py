"""The closed-loop point a replica runs at, and the TPOT rate, on tables made by hand."""

from __future__ import annotations

import math

import pandas as pd
from backpressure.generator.plan.concurrency import point_at_rate, tpot_rate


def _table(rows):
    """rows: (config_id, users, requests_per_s, tpot_ms)."""
    frame = pd.DataFrame(rows, columns=["config_id", "users", "requests_per_s", "tpot_ms"])
    frame["config_id"] = frame["config_id"].astype("string")
    frame["tokens_per_user"] = 1000.0 / frame["tpot_ms"]
    frame["ttft_ms"] = 100.0
    return frame


TABLE = _table(
    [
        ("a", 1, 1.0, 10.0),
        ("a", 2, 2.0, 12.0),
        ("a", 4, 3.0, 20.0),
        ("a", 8, 3.5, 40.0),
        ("b", 1, 0.5, 30.0),
        ("b", 2, 0.8, 60.0),
        ("c", 1, 1.0, 10.0),
        ("c", 2, 2.0, 30.0),
        ("c", 4, 3.0, 12.0),  # not monotone: the TPOT rate stops at the first miss
    ]
)


def test_a_replica_runs_at_the_first_row_that_carries_its_rate():
    at = point_at_rate(TABLE, pd.Series({"a": 2.5, "b": 0.1, "c": 2.0}))
    assert at.loc["a", "users"] == 4  # 2 users carry 2.0 requests/s, 4 carry 3.0
    assert at.loc["b", "users"] == 1
    assert at.loc["c", "users"] == 2  # exactly reached counts
    assert at.loc["a", "tpot_ms"] == 20.0


def test_past_the_peak_the_server_runs_full():
    at = point_at_rate(TABLE, pd.Series({"a": 10.0}))
    assert at.loc["a", "users"] == 8


def test_missing_rates_and_tables_are_left_out():
    at = point_at_rate(TABLE, pd.Series({"a": math.nan, "zz": 1.0, "b": 0.6}))
    assert list(at.index) == ["b"]


def test_the_tpot_rate():
    rate = tpot_rate(TABLE, 15.0)
    assert rate["a"] == 2.0  # rows 1 and 2 meet 15 ms, row 3 does not
    assert math.isnan(rate["b"])  # one user already sees 30 ms
    assert rate["c"] == 1.0
    assert tpot_rate(TABLE, 50.0)["a"] == math.inf  # even the full server meets it
    assert tpot_rate(TABLE, 10.0)["a"] == 1.0


def test_a_rate_under_the_tpot_rate_meets_the_target():
    # the definition, checked against the first rule for every rate on a grid
    y = 15.0
    rate = tpot_rate(TABLE, y)["a"]
    for k in range(1, 40):
        lam = k / 10
        tpot = point_at_rate(TABLE, pd.Series({"a": lam})).loc["a", "tpot_ms"]
        assert (tpot <= y) == (lam <= rate), lam
