"""Configs computed for a plan are what the sweep computes for them."""

from __future__ import annotations

import dataclasses

import pytest
from backpressure.generator.plan.frame import read_sweep
from backpressure.generator.plan.resweep import (
    Profile,
    candidates,
    evaluate,
    planning_catalog,
    reasons,
    sweep_profile,
)
from pydantic import ValidationError

from tests.generator.plan.conftest import MODEL

IDS = ["rtx-4090--llama-3.1-8b--q4_k_m--8k", "h100-sxm--llama-3.1-8b--fp8--8k"]


def test_the_sweep_settings_compute_the_sweep_rows(small):
    planning = planning_catalog(small.cat, sweep_profile(small.cat), [8192], ["q4_k_m", "fp8"])
    combos = [c for c in candidates(planning, MODEL, None) if c.id in IDS]
    assert [c.id for c in combos] == sorted(IDS)
    results, tables = evaluate(small.cat, planning, combos, 1, None)
    swept = read_sweep(small.sweep)
    want = swept.results[swept.results["config_id"].isin(IDS)].reset_index(drop=True)
    got = results.reset_index(drop=True)
    cols = [c for c in want.columns if c != "fingerprint"]  # a planner row is not published
    assert got[cols].equals(want[cols])
    want_t = swept.concurrency[swept.concurrency["config_id"].isin(IDS)].reset_index(drop=True)
    assert tables.reset_index(drop=True).equals(want_t)


def test_another_profile_is_simulated_with_it(small):
    base = sweep_profile(small.cat)
    longer = dataclasses.replace(base, output_tokens=4 * base.output_tokens)
    planning = planning_catalog(small.cat, longer, [8192], ["q4_k_m"])
    combos = candidates(planning, MODEL, "rtx-4090")
    assert [c.id for c in combos] == [IDS[0]]
    results, _ = evaluate(small.cat, planning, combos, 1, None)
    swept = read_sweep(small.sweep, device="rtx-4090").results.set_index("config_id")
    # four times the output per request: fewer requests a second
    assert results["breaking_rps"].iloc[0] < swept.at[IDS[0], "breaking_rps"]


def test_reasons_name_what_differs_from_the_sweep(small):
    base = sweep_profile(small.cat)
    assert reasons(small.cat, base, [8192], ["q4_k_m"]) == []
    why = reasons(
        small.cat, dataclasses.replace(base, ttft_budget_ms=500.0), [6000], ["q4_k_m", "q8_0"]
    )
    assert why[0].startswith("the request profile differs from the sweep's (1,024 prompt")
    assert why[1] == "the sweep covers contexts 2k, 8k, not 6,000 tokens"
    assert why[2] == "the sweep does not cover quant q8_0"


def test_settings_the_schema_refuses_are_refused(small):
    with pytest.raises(ValidationError):
        planning_catalog(small.cat, Profile(1024, 128, -5.0), [8192], ["q4_k_m"])
