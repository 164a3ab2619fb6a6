"""Prices, $/hour, $/M tokens and tokens per joule, against hand arithmetic."""

from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np
import pandas as pd
import pytest
from backpressure.catalog.prices import ElectricityPrice, PurchasePrice, RentalPrice
from backpressure.generator.plan.economics import (
    BASES,
    device_price,
    economics,
    prices_frame,
    tokens_per_joule,
    unpriced_reason,
    usd_per_mtok,
    with_slo_rate,
)
from backpressure.generator.plan.frame import read_sweep
from backpressure.generator.resolve import LookupError_

DAY = dt.date(2025, 1, 2)


def _priced(cat, gpu_id, *, rental=None, purchase=None, power=None, kwh=0.20, years=2.0):
    """The catalog with one GPU's prices and power and the cost settings replaced."""
    gpu = cat.gpus[gpu_id]
    update = {}
    if rental is not None:
        update["rental_prices"] = (
            RentalPrice(
                provider="Cloud A",
                usd_per_gpu_hour=rental,
                as_of=DAY,
                source="https://a.example",
                default=True,
                default_reason="test",
            ),
            RentalPrice(
                provider="Cloud B",
                usd_per_gpu_hour=rental / 2,
                as_of=DAY,
                source="https://b.example",
            ),
        )
    if purchase is not None:
        update["purchase_prices"] = (
            PurchasePrice(
                usd=purchase,
                kind="street",
                item="card",
                as_of=DAY,
                source="https://shop.example",
                default=True,
                default_reason="test",
            ),
        )
    if power is not None:
        update["board_power_w"] = power
        update["board_power_kind"] = "board"
    electricity = ElectricityPrice(
        usd_per_kwh=kwh,
        region="Test",
        sector="all",
        period="2024",
        as_of=DAY,
        source="https://e.example",
    )
    settings = cat.settings.model_copy(
        update={"electricity": electricity, "amortisation_years": years}
    )
    return dataclasses.replace(
        cat, gpus={**cat.gpus, gpu_id: gpu.model_copy(update=update)}, settings=settings
    )


def test_owned_is_purchase_over_the_years_plus_power(cat):
    c = _priced(cat, "rtx-4090", purchase=1752.0, power=500.0, kwh=0.20, years=2.0)
    p = device_price(c, "rtx-4090")
    # by hand: 1752 / (2 x 8760) = 0.1 $/h; 0.5 kW x 0.20 $/kWh = 0.1 $/h
    assert p.basis == "owned"
    assert p.capital_usd_per_hour == pytest.approx(0.1, rel=1e-12)
    assert p.energy_usd_per_hour == pytest.approx(0.1, rel=1e-12)
    assert p.usd_per_hour == pytest.approx(0.2, rel=1e-12)
    assert p.as_of == "2025-01-02"
    assert p.electricity_as_of == "2025-01-02"
    assert p.source == "https://shop.example"
    # a rig of two: twice the cards, twice the power
    rig = device_price(c, "2x-rtx-4090")
    assert rig.gpu_count == 2
    assert rig.usd_per_hour == pytest.approx(0.4, rel=1e-12)


def test_rental_is_the_default_quote_times_the_gpus(cat):
    c = _priced(cat, "h100-sxm", rental=3.0, purchase=30_000.0, power=700.0)
    one = device_price(c, "h100-sxm")
    assert (one.basis, one.usd_per_hour, one.energy_usd_per_hour) == ("rental", 3.0, 0.0)
    assert one.quote == "Cloud A"  # the default, not the cheaper second quote
    assert device_price(c, "8x-h100-sxm").usd_per_hour == pytest.approx(24.0, rel=1e-12)
    owned = device_price(c, "h100-sxm", "owned")
    # 30000 / (2 x 8760) + 0.7 x 0.20
    assert owned.usd_per_hour == pytest.approx(30_000 / 17_520 + 0.14, rel=1e-12)


def test_the_bundled_rig_carries_eight_times_its_gpu(cat):
    gpu = device_price(cat, "h100-sxm")
    rig = device_price(cat, "8x-h100-sxm")
    assert gpu is not None
    assert rig is not None
    assert rig.usd_per_hour == pytest.approx(8 * gpu.usd_per_hour, rel=1e-12)
    assert rig.as_of == gpu.as_of
    assert rig.source == gpu.source


def test_unpriced_devices_say_why(cat):
    assert device_price(cat, "m4-max-128gb") is None
    assert unpriced_reason(cat, "m4-max-128gb") == "no price in the catalog"
    assert unpriced_reason(cat, "rtx-4090", "rental") == "no rental price in the catalog"
    assert unpriced_reason(cat, "h100-sxm", "owned") == "no purchase price in the catalog"
    no_power = _priced(cat, "rtx-4090", purchase=1000.0)
    no_power = dataclasses.replace(
        no_power,
        gpus={
            **no_power.gpus,
            "rtx-4090": no_power.gpus["rtx-4090"].model_copy(
                update={"board_power_w": None, "board_power_kind": None}
            ),
        },
    )
    assert device_price(no_power, "rtx-4090") is None
    assert "board power" in unpriced_reason(no_power, "rtx-4090")
    assert unpriced_reason(cat, "rtx-4090") is None
    with pytest.raises(LookupError_, match="did you mean"):
        device_price(cat, "rtx-4091")


def test_cost_per_million_tokens_and_tokens_per_joule_by_hand():
    # 2 $/h at 10 requests/s of 100 tokens: 3.6 M tokens an hour, so 2 / 3.6 $/M
    got = usd_per_mtok(np.array([2.0, 2.0, np.nan]), np.array([10.0, 0.0, 10.0]), 100)
    assert got[0] == pytest.approx(2 / 3.6, rel=1e-12)
    assert np.isnan(got[1])
    assert np.isnan(got[2])
    # 10 requests/s x 100 tokens over 500 W
    tpj = tokens_per_joule(np.array([10.0, 10.0]), 100, np.array([500.0, np.nan]))
    assert tpj[0] == pytest.approx(2.0, rel=1e-12)
    assert np.isnan(tpj[1])


def test_economics_carries_the_band_through(cat, small):
    c = _priced(small.cat, "rtx-4090", purchase=1752.0, power=500.0)
    results = read_sweep(small.sweep).results
    econ = economics(results, prices_frame(c, results["gpu"]), c.settings.output_tokens)
    assert list(econ["config_id"]) == list(results["config_id"])  # rows kept, in order
    row = econ[(econ["gpu"] == "rtx-4090") & econ["breaking_rps"].notna()].iloc[0]
    o = c.settings.output_tokens
    assert row["usd_per_hour"] == pytest.approx(0.2, rel=1e-12)
    assert row["usd_per_mtok_breaking"] == pytest.approx(
        0.2 * 1e6 / (3600 * row["breaking_rps"] * o), rel=1e-12
    )
    # the cheap end of the cost band is the high end of the rate band, and back
    assert row["usd_per_mtok_breaking_low"] == pytest.approx(
        0.2 * 1e6 / (3600 * row["breaking_rps_high"] * o), rel=1e-12
    )
    assert row["usd_per_mtok_breaking_high"] == pytest.approx(
        0.2 * 1e6 / (3600 * row["breaking_rps_low"] * o), rel=1e-12
    )
    assert row["usd_per_mtok_breaking_low"] < row["usd_per_mtok_breaking"]
    assert row["usd_per_mtok_breaking"] < row["usd_per_mtok_breaking_high"]
    assert row["tokens_per_joule_breaking"] == pytest.approx(row["breaking_rps"] * o / 500.0)
    assert row["usd_per_mtok_saturation"] == pytest.approx(
        0.2 * 1e6 / (3600 * row["saturation_rps"] * o), rel=1e-12
    )
    assert row["price_as_of"] == "2025-01-02"
    unpriced = econ[econ["gpu"] == "m4-max-128gb"]
    assert unpriced["usd_per_hour"].isna().all()
    assert set(unpriced["unpriced_reason"]) == {"no price in the catalog"}


def test_the_slo_rate_is_the_lower_latency_rule():
    frame = pd.DataFrame(
        {
            "ttft_break_rps": [2.0, np.nan, np.nan, 5.0],
            "p99_break_rps": [3.0, 4.0, np.nan, 1.0],
            "serving_band_pct": pd.array([20, 20, 20, pd.NA], dtype="Int64"),
        }
    )
    out = with_slo_rate(frame)
    assert out["slo_rps"].tolist()[:2] == [2.0, 4.0]
    assert np.isnan(out["slo_rps"].iloc[2])
    assert out["slo_rps_low"].iloc[0] == pytest.approx(1.6)
    assert out["slo_rps_high"].iloc[1] == pytest.approx(4.8)
    assert out["slo_rps"].iloc[3] == 1.0
    assert np.isnan(out["slo_rps_low"].iloc[3])


def test_the_cli_spells_the_bases_as_economics_does():
    from backpressure.generator.cli.plan import BASES as CLI_BASES

    assert CLI_BASES == BASES
