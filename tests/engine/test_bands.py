"""The band rule: which departures widen a config's band, and by how much."""

from __future__ import annotations

import statistics

from backpressure.engine.bands import BASE_PCT, WIDENINGS, error_band
from backpressure.generator.accuracy.decode import _band, _dense_tps, _kind, dense_points, fit_dense


def test_an_amd_gpu_widens_the_band_and_names_why() -> None:
    nvidia = error_band("discrete", 8_000_000_000, 1, False, None, True, True, 40, "nvidia")
    amd = error_band("discrete", 8_000_000_000, 1, False, None, True, True, 40, "amd")
    assert nvidia.pct == BASE_PCT
    assert amd.pct == BASE_PCT + WIDENINGS["amd"][0]
    assert "AMD GPU" in amd.reason
    assert "AMD" not in nvidia.reason


def test_the_amd_band_covers_the_fit_half_of_amd_decode_rows() -> None:
    # The widening is read off the fit half of the dense llama-bench rows: the
    # band of an AMD row must hold 90 % of them, as the rule asks of every band.
    points = dense_points()
    half = fit_dense([p for p in points if p["fit"]])
    eff, over, _ = half["amd"]
    rows = [p for p in points if p["fit"] and p["platform"] == "amd"]
    assert len(rows) >= 8
    misses = [abs(_dense_tps(p, eff, over) / float(p["tps"]) - 1) * 100 for p in rows]
    bands = [
        _band(_kind(str(p["hardware"]), "amd"), float(p["params"]), False, "amd") for p in rows
    ]
    inside = sum(m <= b for m, b in zip(misses, bands, strict=True))
    assert inside / len(rows) >= 0.9, (sorted(misses), bands)
    # and without the widening they would not be
    narrow = [b - WIDENINGS["amd"][0] for b in bands]
    assert sum(m <= b for m, b in zip(misses, narrow, strict=True)) / len(rows) < 0.9
    assert statistics.median(misses) > 10
