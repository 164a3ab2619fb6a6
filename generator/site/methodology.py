"""What the methodology page prints: every constant with its source, and the band rule."""

from __future__ import annotations

from typing import Any

from backpressure.catalog.loader import Catalog
from backpressure.engine import bands
from backpressure.generator.site.pages import classify


def slo_ms(cat: Catalog) -> float:
    """The p99 SLO the sweep judges against [ms].

    Unset in the settings, it is the TTFT budget plus the output streamed at the
    slowest per-stream speed that still counts as serving.
    """
    s = cat.settings
    if s.p99_slo_ms is not None:
        return float(s.p99_slo_ms)
    floor = cat.calibration["min_stream_tokens_per_s"].value
    return float(s.ttft_budget_ms + s.output_tokens / floor * 1000)


def _runtime_rows(cat: Catalog) -> list[dict[str, str]]:
    rows = []
    for rid, rt in cat.runtimes.items():
        for field, source in sorted(rt.sources.items()):
            value = getattr(rt, field, None)
            if value is None:
                continue
            rows.append(
                {
                    "name": f"{rid}: {field}",
                    "value": f"{value:,}" if isinstance(value, int) else f"{value:g}",
                    "label": classify(source),
                    "source": source,
                }
            )
    return rows


def methodology_context(cat: Catalog) -> dict[str, Any]:
    """Calibration constants, quant bits, runtime profiles, settings and the band table."""
    s = cat.settings
    return {
        "root": "../",
        "calibration": [
            {
                "name": name,
                "value": f"{c.value:g}",
                "unit": c.unit,
                "meaning": c.meaning,
                "label": classify(c.source),
                "source": c.source,
            }
            for name, c in cat.calibration.items()
        ],
        "quants": [
            {
                "id": qid,
                "name": q.name,
                "bits": f"{q.bits_per_weight:g}",
                "source": q.sources.get("bits_per_weight", ""),
            }
            for qid, q in cat.quants.items()
        ],
        "runtimes": _runtime_rows(cat),
        "base_pct": bands.BASE_PCT,
        "max_pct": bands.MAX_PCT,
        "widenings": [
            {"key": k, "pct": pct, "reason": reason} for k, (pct, reason) in bands.WIDENINGS.items()
        ],
        "small_b": bands.SMALL_PARAMS / 1e9,
        "large_b": bands.LARGE_PARAMS / 1e9,
        "tight": bands.TIGHT_SLOTS,
        "snug": bands.SNUG_SLOTS,
        "settings": {
            "contexts": ", ".join(f"{c:,}" for c in s.contexts),
            "quants": ", ".join(s.sweep_quants),
            "prompt": s.prompt_tokens,
            "output": s.output_tokens,
            "ttft": s.ttft_budget_ms,
            "slo": slo_ms(cat),
            "soak_util": s.soak_utilization,
            "soak_s": s.soak_seconds,
            "seed": s.seed,
            "sim_s": s.sim_seconds,
            "min_services": s.sim_min_service_times,
            "points": s.load_points,
            "min_fraction": s.load_min_fraction,
            "max_fraction": s.load_max_fraction,
            "depth": s.queue_depth_per_slot,
            "max_age": s.queue_max_age_s,
        },
    }
