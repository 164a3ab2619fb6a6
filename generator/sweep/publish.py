"""A simulated server as the sweep publishes it: row fields with bands, and chart series."""

from __future__ import annotations

import math
from typing import Any

from backpressure.catalog.loader import Catalog
from backpressure.engine.bands import Band
from backpressure.engine.results import CapacityResult
from backpressure.engine.serving.rules import Verdict
from backpressure.generator import resolve, text
from backpressure.generator.records import Curves
from backpressure.generator.resolve import Config
from backpressure.generator.sweep.rig import LoadSettings, Serving
from backpressure.generator.text import sig


def _opt(x: float | None, digits: int = 6) -> float | None:
    return None if x is None or not math.isfinite(x) else sig(x, digits)


def serving_band(cat: Catalog, cfg: Config, cap: CapacityResult) -> Band:
    """The band of a config's serving numbers (:func:`resolve.serving_band`)."""
    return resolve.serving_band(cat, cfg.runtime_id, cfg.arch is not None and cfg.arch.is_moe, cap)


def serving_fields(
    cap: CapacityResult, s: Serving | None, band: Band, settings: LoadSettings
) -> dict[str, Any]:
    """The serving columns of a results row."""
    pct = band.pct

    def banded(name: str, value: float | None) -> dict[str, float | None]:
        v = _opt(value)
        return {
            name: v,
            f"{name}_low": None if v is None else sig(v * (1 - pct / 100)),
            f"{name}_high": None if v is None else sig(v * (1 + pct / 100)),
        }

    out: dict[str, Any] = {
        "usable": None,
        "max_concurrency": None,
        "reached_concurrency": None,
        "single_stream_tokens_per_s": None,
        "single_ttft_ms": None,
        **banded("saturation_rps", None),
        "saturation_bound": None,
        **banded("breaking_rps", None),
        "breaking_rule": None,
        "fails_at_any_load": None,
        "ttft_break_rps": None,
        "p99_break_rps": None,
        "shed_onset_rps": None,
        "soak_break_rps": None,
        "serving_band_pct": None,
        "serving_band_reason": None,
        "bottleneck": text.bottleneck(cap, s, settings),
        "verdict": text.verdict(cap, s, settings, pct),
    }
    if s is None:
        return out
    out.update(
        usable=s.usable,
        max_concurrency=s.max_concurrency,
        reached_concurrency=sig(s.reached_concurrency, 4),
        single_stream_tokens_per_s=sig(s.single.tokens_per_s_per_user),
        single_ttft_ms=sig(s.single.ttft_ms),
        **banded("saturation_rps", s.saturation_rps),
        saturation_bound=s.bound,
        serving_band_pct=pct,
        serving_band_reason=band.reason,
    )
    b = s.breaking
    if b is None:
        return out
    rates = b.rule_rates
    out.update(
        **banded("breaking_rps", b.rate),
        breaking_rule=b.rule,
        fails_at_any_load=b.fails_at_any_load,
        ttft_break_rps=_opt(rates["ttft"]),
        p99_break_rps=_opt(rates["p99"]),
        shed_onset_rps=_opt(rates["error_budget"]),
        soak_break_rps=_opt(rates["soak"]),
    )
    return out


def _ms(v: Verdict, name: str) -> float | None:
    x = getattr(v, name)
    return None if not math.isfinite(x) else sig(x * 1e3, 5)


def _r(values: Any, digits: int = 5) -> tuple[Any, ...]:
    """Every value to ``digits`` significant digits, formatted in one call (None kept)."""
    vals = tuple(values)
    fmt = f"%.{digits}g "
    try:
        # Most series are all finite numbers: then so is their sum (an overflow or a
        # None, inf or NaN takes the general path below, which gives the same).
        whole = math.isfinite(sum(vals))
    except TypeError:
        whole = False
    if whole:
        return tuple(map(float, ((fmt * len(vals)) % vals).split()))
    keep = [x for x in vals if x is not None and math.isfinite(x)]
    rounded = iter(map(float, ((fmt * len(keep)) % tuple(keep)).split())) if keep else iter(())
    return tuple(next(rounded) if x is not None and math.isfinite(x) else None for x in vals)


def curves_of(cid: str, s: Serving | None) -> Curves:
    """Chart series of one config (empty where nothing was simulated)."""
    if s is None:
        return Curves(
            cid, (), (), (), (), (), (), (), (), (), (), (), (), (), (), None, (), (), (), (), ()
        )
    table = s.table
    runs = s.curve
    t = s.timeline
    return Curves(
        config_id=cid,
        load_rps=_r(v.rate for v in runs),
        ttft_p50_ms=tuple(_ms(v, "ttft_p50_s") for v in runs),
        ttft_p99_ms=tuple(_ms(v, "ttft_p99_s") for v in runs),
        e2e_p99_ms=tuple(_ms(v, "e2e_p99_s") for v in runs),
        goodput_rps=_r(v.goodput_rps for v in runs),
        lost_share=_r(v.lost_share for v in runs),
        occupancy=_r(v.occupancy for v in runs),
        users=tuple(p.users for p in table),
        table_ttft_ms=_r(p.ttft_ms for p in table),
        table_tpot_ms=_r(p.tpot_ms for p in table),
        table_tokens_per_user=_r(p.tokens_per_s_per_user for p in table),
        table_output_tps=_r(p.output_tokens_per_s for p in table),
        table_requests_per_s=_r(p.requests_per_s for p in table),
        table_running=_r(p.running for p in table),
        timeline_rps=None if t is None else sig(t.rate),
        timeline_s=() if t is None else _r(t.seconds),
        timeline_queue_depth=() if t is None else _r(t.queue_depth),
        timeline_occupancy=() if t is None else _r(t.occupancy),
        timeline_ttft_p99_ms=() if t is None else _r(t.ttft_p99_ms),
        timeline_lost=() if t is None else _r(t.lost),
    )
