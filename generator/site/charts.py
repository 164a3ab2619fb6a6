"""The three config-page charts as Altair specs, built once, with data bound by name.

Each builder returns an ``alt.Chart`` (or layer / facet) whose layers read
named datasets (``alt.Data(name=...)``) and carry no values. Constructing a
chart costs Altair about 20 ms, so :func:`chart_specs` builds each kind once
per process; a page then ships only its datasets (:func:`datasets_for`) and the
browser joins the two (:func:`with_data` does the same join in Python for the
static fallback and for tests).
"""

from __future__ import annotations

import bisect
import functools
import math
from typing import Any

import altair as alt
from backpressure.generator.records import Curves, ResultRow

TTFT_BUDGET_MS = 1500.0
KINDS = ("breaking", "occupancy", "timeline", "health")
_WIDTH: Any = "container"
_HEIGHT = 260
_SERIES_COLORS = alt.Scale(domain=["p50", "p99", "TTFT"], range=["#4c78a8", "#e45756", "#f58518"])


def breaking_chart() -> alt.LayerChart:
    """(a) p50, p99 and TTFT against offered rps (log axis), band, limits, break rules."""
    x = alt.X("rps:Q", title="offered load [requests/s]", scale=alt.Scale(type="log"))
    band = (
        alt.Chart(alt.Data(name="latency_band"))
        .mark_area(opacity=0.18, color="#e45756")
        .encode(x=x, y=alt.Y("lo:Q"), y2="hi:Q", tooltip=["rps:Q", "lo:Q", "hi:Q"])
    )
    lines = (
        alt.Chart(alt.Data(name="latency"))
        .mark_line(point=alt.OverlayMarkDef(size=18))
        .encode(
            x=x,
            y=alt.Y("ms:Q", title="latency [ms]", scale=alt.Scale(type="log")),
            color=alt.Color("series:N", title=None, scale=_SERIES_COLORS),
            tooltip=["series:N", "rps:Q", "ms:Q"],
        )
    )
    limits = (
        alt.Chart(alt.Data(name="limits"))
        .mark_rule(strokeDash=[6, 4], color="#555")
        .encode(y="ms:Q", tooltip=["label:N", "ms:Q"])
    )
    # Two labels, one above its line (the SLO) and one below (the TTFT budget),
    # so they stay readable when the two limits are close.
    above = (
        alt.Chart(alt.Data(name="limits"))
        .transform_filter(alt.datum.kind == "slo")
        .mark_text(align="right", dy=-7, color="#555", fontSize=11)
        .encode(y="ms:Q", x=alt.value("width"), text="label:N")
    )
    below = (
        alt.Chart(alt.Data(name="limits"))
        .transform_filter(alt.datum.kind == "ttft")
        .mark_text(align="right", dy=9, color="#555", fontSize=11)
        .encode(y="ms:Q", x=alt.value("width"), text="label:N")
    )
    break_band = (
        alt.Chart(alt.Data(name="breaks"))
        .mark_rect(opacity=0.12, color="#333")
        .encode(x="lo:Q", x2="hi:Q", tooltip=["label:N", "rps:Q", "lo:Q", "hi:Q"])
    )
    break_rule = (
        alt.Chart(alt.Data(name="breaks"))
        .mark_rule(color="#333", strokeWidth=1.5)
        .encode(x="rps:Q", tooltip=["label:N", "rps:Q"])
    )
    return alt.layer(break_band, band, lines, limits, above, below, break_rule).properties(
        width=_WIDTH, height=_HEIGHT, title="Latency against offered load"
    )


def occupancy_chart() -> alt.LayerChart:
    """(b) slot occupancy and shed share (left axis), goodput (right axis) against offered rps."""
    x = alt.X("rps:Q", title="offered load [requests/s]", scale=alt.Scale(type="log"))
    shares = (
        alt.Chart(alt.Data(name="shares"))
        .mark_line()
        .encode(
            x=x,
            y=alt.Y(
                "share:Q", title="share", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])
            ),
            color=alt.Color(
                "series:N",
                title=None,
                scale=alt.Scale(
                    domain=["slot occupancy", "shed share", "goodput"],
                    range=["#4c78a8", "#e45756", "#54a24b"],
                ),
            ),
            tooltip=["series:N", "rps:Q", alt.Tooltip("share:Q", format=".0%")],
        )
    )
    goodput = (
        alt.Chart(alt.Data(name="goodput"))
        .mark_line(strokeDash=[4, 3])
        .encode(
            x=x,
            y=alt.Y("rps_served:Q", title="goodput [requests/s]"),
            color=alt.Color("series:N", title=None),
            tooltip=["rps:Q", "rps_served:Q"],
        )
    )
    return (
        alt.layer(shares, goodput)
        .resolve_scale(y="independent")
        .properties(width=_WIDTH, height=_HEIGHT, title="Slots, shedding and goodput")
    )


def timeline_chart() -> alt.FacetChart:
    """(c) queue depth, TTFT and error budget per tick of the run at the breaking point."""
    return (
        alt.Chart(alt.Data(name="timeline"))
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("t:Q", title="simulated time [s]"),
            y=alt.Y("value:Q", title=None),
            color=alt.Color("metric:N", legend=None),
            tooltip=["metric:N", "t:Q", "value:Q"],
        )
        .properties(width=_WIDTH, height=90)
        .facet(
            row=alt.Row(
                "metric:N", title=None, sort=["queue depth", "TTFT [ms]", "error budget left"]
            )
        )
        .resolve_scale(y="independent")
        .properties(title="At the breaking point")
    )


def health_chart() -> alt.FacetChart:
    """Scenario pages: each node's utilization, queue, p99 and error budget per second."""
    return (
        alt.Chart(alt.Data(name="health"))
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("t:Q", title="simulated time [s]"),
            y=alt.Y("value:Q", title=None),
            color=alt.Color("node:N", title="node"),
            tooltip=["node:N", "metric:N", "t:Q", "value:Q"],
        )
        .properties(width=_WIDTH, height=80)
        .facet(
            row=alt.Row(
                "metric:N",
                title=None,
                sort=["utilization", "queue depth", "p99 [ms]", "error budget left"],
            )
        )
        .resolve_scale(y="independent")
        .properties(title="Per-node health over time")
    )


BUILDERS = {
    "breaking": breaking_chart,
    "occupancy": occupancy_chart,
    "timeline": timeline_chart,
    "health": health_chart,
}


@functools.cache
def chart_specs() -> dict[str, dict[str, Any]]:
    """Vega-Lite spec of each chart kind without data; built once per process."""
    return {kind: BUILDERS[kind]().to_dict() for kind in KINDS}


def _sig(x: float) -> float:
    """Four significant digits: plenty for a chart, a third of the bytes of a full repr."""
    return float(f"{x:.4g}")


def _interp_log(xs: tuple[float, ...], ys: tuple[float, ...], x: float) -> float:
    """Linear interpolation in log-x, clamped to the grid ends."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    i = bisect.bisect_left(xs, x)
    w = (math.log(x) - math.log(xs[i - 1])) / (math.log(xs[i]) - math.log(xs[i - 1]))
    return ys[i - 1] + w * (ys[i] - ys[i - 1])


def _breaks(row: ResultRow) -> list[dict[str, Any]]:
    points = (
        ("p99 breaks SLO", row.p99_break_rps, row.p99_break_rps_low, row.p99_break_rps_high),
        ("TTFT > 1500 ms", row.ttft_break_rps, row.ttft_break_rps_low, row.ttft_break_rps_high),
    )
    return [
        {"label": label, "rps": _sig(v), "lo": _sig(lo or v), "hi": _sig(hi or v)}
        for label, v, lo, hi in points
        if v is not None
    ][:1]


def _latency(row: ResultRow, c: Curves, slo_ms: float) -> dict[str, list[dict[str, Any]]]:
    series = (("p50", c.p50_ms), ("p99", c.p99_ms), ("TTFT", c.ttft_ms))
    latency = [
        {"series": name, "rps": _sig(x), "ms": _sig(y)}
        for name, ys in series
        for x, y in zip(c.load_rps, ys, strict=True)
    ]
    # The band: the p99 curve if capacity were band % higher (lo) or lower (hi).
    k = row.error_band_pct / 100
    band = [
        {
            "rps": _sig(x),
            "lo": _sig(_interp_log(c.load_rps, c.p99_ms, x / (1 + k))),
            "hi": _sig(_interp_log(c.load_rps, c.p99_ms, x / max(1 - k, 0.05))),
        }
        for x in c.load_rps
    ]
    limits = [
        {"kind": "slo", "label": f"p99 SLO {slo_ms:,.0f} ms", "ms": slo_ms},
        {"kind": "ttft", "label": f"TTFT budget {TTFT_BUDGET_MS:,.0f} ms", "ms": TTFT_BUDGET_MS},
    ]
    return {"latency": latency, "latency_band": band, "limits": limits, "breaks": _breaks(row)}


def _occupancy(c: Curves) -> dict[str, list[dict[str, Any]]]:
    series = (("slot occupancy", c.slot_occupancy), ("shed share", c.shed_share))
    shares = [
        {"series": name, "rps": _sig(x), "share": _sig(y)}
        for name, ys in series
        for x, y in zip(c.load_rps, ys, strict=True)
    ]
    goodput = [
        {"series": "goodput", "rps": _sig(x), "rps_served": _sig(y)}
        for x, y in zip(c.load_rps, c.goodput_rps, strict=True)
    ]
    return {"shares": shares, "goodput": goodput}


def _timeline(c: Curves) -> dict[str, list[dict[str, Any]]]:
    series = (
        ("queue depth", c.timeline_queue_depth),
        ("TTFT [ms]", c.timeline_ttft_ms),
        ("error budget left", c.timeline_error_budget),
    )
    rows = [
        {"metric": name, "t": _sig(t), "value": _sig(v)}
        for name, ys in series
        for t, v in zip(c.timeline_s, ys, strict=True)
    ]
    return {"timeline": rows}


def datasets_for(row: ResultRow, curves: Curves | None, slo_ms: float) -> dict[str, Any]:
    """Per-kind named datasets for one config; kinds without data are left out."""
    if curves is None or not curves.load_rps:
        return {}
    out: dict[str, Any] = {
        "breaking": _latency(row, curves, slo_ms),
        "occupancy": _occupancy(curves),
    }
    if curves.timeline_s:
        out["timeline"] = _timeline(curves)
    return out


def with_data(
    spec: dict[str, Any], datasets: dict[str, Any], width: int | None = None
) -> dict[str, Any]:
    """A copy of ``spec`` with its named datasets filled (and a fixed width if asked)."""
    out = {**spec, "datasets": datasets}
    if width is not None:
        out = _fixed_width(out, width)
    return out


def _fixed_width(spec: dict[str, Any], width: int) -> dict[str, Any]:
    """Replace ``"container"`` widths, which only a browser can resolve."""
    if spec.get("width") == "container":
        spec = {**spec, "width": width}
    if isinstance(spec.get("spec"), dict):
        spec = {**spec, "spec": _fixed_width(spec["spec"], width)}
    return spec
