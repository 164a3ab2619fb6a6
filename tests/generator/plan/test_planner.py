"""The planner on a small catalog: replicas from the band's low end, cost, order, misses."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from backpressure.generator.plan.economics import economics, prices_frame
from backpressure.generator.plan.frame import read_sweep
from backpressure.generator.plan.planner import (
    PLAN_COLUMNS,
    Target,
    plan,
    replicas_needed,
)

from tests.generator.plan.conftest import MODEL

CFG = "rtx-4090--llama-3.1-8b--q4_k_m--8k"


@pytest.fixture(scope="module")
def econ(small):
    sweep = read_sweep(small.sweep)
    prices = prices_frame(small.cat, sweep.results["gpu"])
    return economics(sweep.results, prices, small.cat.settings.output_tokens), sweep.concurrency


def _target(small, rps, **kw):
    return Target(MODEL, rps, 8192, small.cat.settings.output_tokens, **kw)


def _row(frame, cid):
    return frame[frame["config_id"] == cid].iloc[0]


def test_replicas_count_from_the_low_end_of_the_band(small, econ):
    frame, table = econ
    row = _row(frame, CFG)
    # offering exactly the point estimate: one replica by it, but the band's low
    # end holds only part of it, so more are planned
    rps = float(row["breaking_rps"])
    assert row["breaking_rps_low"] < rps
    got = _row(plan(frame, table, _target(small, rps)).plans, CFG)
    assert got["replicas"] == math.ceil(rps / row["breaking_rps_low"])
    assert got["replicas"] >= 2
    assert math.ceil(rps / row["breaking_rps"]) == 1
    assert got["rps_per_replica"] == pytest.approx(rps / got["replicas"])
    # and ten times the low end takes exactly ten
    ten = _row(plan(frame, table, _target(small, 10 * row["breaking_rps_low"])).plans, CFG)
    assert ten["replicas"] == 10


def test_a_whole_quotient_is_not_rounded_up_by_float_division():
    assert 2.1 / 0.3 > 7  # why the slack exists
    assert list(replicas_needed(2.1, np.array([0.3, 0.21, np.inf]))) == [7, 10, 0]
    assert np.isnan(replicas_needed(1.0, np.array([np.nan]))[0])
    assert replicas_needed(3.0000001, np.array([1.0]))[0] == 4


def test_costs_by_hand(small, econ):
    frame, table = econ
    gpu = small.cat.gpus["rtx-4090"]
    quote = next(q for q in gpu.purchase_prices if q.default)
    s = small.cat.settings
    # owned: purchase over the amortisation years of 8,760 h, plus rated power at the kWh price
    per_hour = quote.usd / (s.amortisation_years * 8760) + gpu.board_power_w / 1000 * (
        s.electricity.usd_per_kwh
    )
    got = _row(plan(frame, table, _target(small, 7.0)).plans, CFG)
    n = math.ceil(7.0 / _row(frame, CFG)["breaking_rps_low"])
    assert got["replicas"] == n
    assert got["usd_per_hour"] == pytest.approx(per_hour, rel=1e-12)
    assert got["usd_per_hour_total"] == pytest.approx(n * per_hour, rel=1e-12)
    tokens_per_hour = 7.0 * s.output_tokens * 3600
    assert got["usd_per_million_output_tokens"] == pytest.approx(
        n * per_hour / tokens_per_hour * 1e6, rel=1e-12
    )
    assert got["price_basis"] == "owned"
    assert got["price_as_of"] == quote.as_of.isoformat()
    assert got["price_source"] == quote.source


def test_plans_are_ranked_by_cost_then_replicas_then_id(small, econ):
    frame, table = econ
    frame = frame.copy()
    unpriced = frame["gpu"] == "2x-rtx-4090"
    frame.loc[unpriced, "usd_per_hour"] = np.nan  # as if the catalog had no price for it
    out = plan(frame, table, _target(small, 5.0)).plans
    assert list(out.columns) == [c for c in PLAN_COLUMNS if c in out.columns]
    keys = [
        (math.inf if pd.isna(t) else t, r, cid)
        for t, r, cid in zip(
            out["usd_per_hour_total"], out["replicas"], out["config_id"], strict=True
        )
    ]
    assert keys == sorted(keys)
    assert out["usd_per_hour_total"].notna().any()
    last = out[out["usd_per_hour_total"].isna()]
    assert set(last["device"]) == {"2x-rtx-4090"}
    assert list(last.index) == list(range(len(out) - len(last), len(out)))  # unpriced last
    # every serving config of the model at the context is there, and nothing else
    mine = frame[(frame["model"] == MODEL) & (frame["context"] == 8192)]
    assert set(out["config_id"]) == set(mine[mine["breaking_rps"].notna()]["config_id"])


def test_ties_are_broken_by_id_whatever_the_input_order(small, econ):
    frame, table = econ
    tied = frame.copy()
    ids = ["rtx-4090--llama-3.1-8b--fp8--8k", "rtx-4090--llama-3.1-8b--bf16--8k", CFG]
    tied.loc[tied["config_id"].isin(ids), "breaking_rps_low"] = 2.0
    shuffled = tied.sample(frac=1.0, random_state=7)
    out = plan(shuffled, table, _target(small, 3.0)).plans
    order = [c for c in out["config_id"] if c in ids]
    assert order == sorted(ids)
    again = plan(tied, table, _target(small, 3.0)).plans
    pd.testing.assert_frame_equal(out, again)


def test_a_tpot_target_adds_replicas_from_the_concurrency_table(small, econ):
    frame, table = econ
    t = table[table["config_id"] == CFG].sort_values("users")
    # a target the two-user row meets and the four-user row does not
    y = float(t["tpot_ms"].iloc[1])
    assert float(t["tpot_ms"].iloc[2]) > y
    tpot_rate = float(t["requests_per_s"].iloc[:2].max())
    row = _row(frame, CFG)
    pct = row["serving_band_pct"] / 100
    rps = 3.0
    want = max(math.ceil(rps / row["breaking_rps_low"]), math.ceil(rps / (tpot_rate * (1 - pct))))
    got = _row(plan(frame, table, _target(small, rps, tpot_ms=y)).plans, CFG)
    assert got["replicas"] == want
    assert got["replicas"] > got["replicas_for_rate"]
    assert got["tpot_rate_rps"] == pytest.approx(tpot_rate)
    assert got["tpot_ms"] <= y  # the planned load meets the target
    assert got["users_per_replica"] <= 2


def test_a_tpot_no_config_meets_names_the_closest(small, econ):
    frame, table = econ
    result = plan(frame, table, _target(small, 1.0, tpot_ms=0.01))
    assert result.plans.empty
    assert len(result.closest) == 3
    low = list(result.closest["breaking_rps_low"])
    assert low == sorted(low, reverse=True)
    mine = frame[(frame["model"] == MODEL) & (frame["context"] == 8192)]
    assert low[0] == mine["breaking_rps_low"].max()
    assert all(w.startswith("TPOT ") for w in result.closest["why_not"])
    assert result.excluded["misses the TPOT target"] == int(mine["breaking_rps"].notna().sum())


def test_a_budget_drops_dearer_and_unpriced_plans(small, econ):
    frame, table = econ
    everything = plan(frame, table, _target(small, 5.0)).plans
    budget = float(everything["usd_per_hour_total"].dropna().iloc[0]) * 1.01
    result = plan(frame, table, _target(small, 5.0, max_usd_per_hour=budget))
    assert len(result.plans) >= 1
    assert (result.plans["usd_per_hour_total"] <= budget).all()
    assert result.excluded.get("no price to hold against the budget", 0) == int(
        everything["usd_per_hour_total"].isna().sum()
    )
    assert result.excluded.get("over the budget", 0) == int(
        (everything["usd_per_hour_total"] > budget).sum()
    )


def test_filters_by_quant_and_device(small, econ):
    frame, table = econ
    out = plan(frame, table, _target(small, 5.0, quants=("fp8",), devices=("rtx-4090",))).plans
    assert list(out["config_id"]) == ["rtx-4090--llama-3.1-8b--fp8--8k"]


def test_nothing_serving_at_the_context_names_the_best_elsewhere(small, econ):
    frame, table = econ
    broken = frame.copy()
    at8k = (broken["context"] == 8192) & (broken["model"] == MODEL)
    broken.loc[at8k, ["breaking_rps", "breaking_rps_low", "breaking_rps_high"]] = np.nan
    result = plan(broken, table, _target(small, 5.0))
    assert result.plans.empty
    assert set(result.closest["context"]) == {2048}
    assert all("2,048 tokens of context only" in w for w in result.closest["why_not"])
    assert sum(result.excluded.values()) == int(at8k.sum())  # every 8k config, by reason
    assert result.excluded["does-not-fit at this context"] == 1


def test_a_device_that_serves_nothing_has_no_plan_and_no_closest(small, econ):
    frame, table = econ
    result = plan(frame, table, _target(small, 1.0, devices=("m4-max-128gb",)))
    assert result.plans.empty
    assert result.closest.empty
    assert result.excluded == {"fails-at-any-load at this context": 2}
