"""The three config-page charts as Altair specs, built once, with data bound by name.

Each builder returns an ``alt.Chart`` (or layer / facet) whose layers read
named datasets (``alt.NamedData(name=...)``) and carry no values. Constructing a
chart costs Altair about 20 ms, so :func:`chart_specs` builds each kind once
per process; a page then ships only its datasets (:func:`datasets_for`) and the
browser joins the two (:func:`with_data` does the same join in Python for the
static fallback and for tests).
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

import altair as alt
from backpressure.generator import text
from backpressure.generator.records import Curves, ResultRow
from backpressure.generator.site.pages import RULE_LABELS, Limits

KINDS = ("breaking", "occupancy", "tradeoff", "timeline", "health")
_WIDTH: Any = "container"
_HEIGHT = 260
_SERIES_COLORS = alt.Scale(
    domain=["TTFT p50", "TTFT p99", "latency p99"], range=["#4c78a8", "#f58518", "#e45756"]
)


Composite = TypeVar("Composite", alt.LayerChart, alt.FacetChart)


def _independent_y(chart: Composite) -> Composite:
    """The chart with a y scale per layer or facet."""
    # altair's signature-copying decorator hides resolve_scale's return type
    out: Composite = chart.resolve_scale(y="independent")
    return out


def _layer(*charts: alt.Chart) -> alt.LayerChart:
    """Charts drawn over each other (none has a facet encoding, so no facet is hoisted)."""
    out = alt.layer(*charts)
    assert isinstance(out, alt.LayerChart)
    return out


def breaking_chart() -> alt.LayerChart:
    """(a) p50, p99 and TTFT against offered rps (log axis), band, limits, break rules."""
    x = alt.X("rps:Q", title="offered load [requests/s]", scale=alt.Scale(type="log"))
    band = (
        alt.Chart(alt.NamedData(name="latency_band"))
        .mark_area(opacity=0.18, color="#e45756")
        .encode(x=x, y=alt.Y("lo:Q"), y2="hi:Q", tooltip=["rps:Q", "lo:Q", "hi:Q"])
    )
    lines = (
        alt.Chart(alt.NamedData(name="latency"))
        .mark_line(point=alt.OverlayMarkDef(size=18))
        .encode(
            x=x,
            y=alt.Y("ms:Q", title="latency [ms]", scale=alt.Scale(type="log")),
            color=alt.Color("series:N", title=None, scale=_SERIES_COLORS),
            tooltip=["series:N", "rps:Q", "ms:Q"],
        )
    )
    limits = (
        alt.Chart(alt.NamedData(name="limits"))
        .mark_rule(strokeDash=[6, 4], color="#555")
        .encode(y="ms:Q", tooltip=["label:N", "ms:Q"])
    )
    # Two labels, one above its line (the SLO) and one below (the TTFT budget),
    # so they stay readable when the two limits are close.
    above = (
        alt.Chart(alt.NamedData(name="limits"))
        .transform_filter(alt.datum.kind == "slo")
        .mark_text(align="right", dy=-7, color="#555", fontSize=11)
        .encode(y="ms:Q", x=alt.value("width"), text="label:N")
    )
    below = (
        alt.Chart(alt.NamedData(name="limits"))
        .transform_filter(alt.datum.kind == "ttft")
        .mark_text(align="right", dy=9, color="#555", fontSize=11)
        .encode(y="ms:Q", x=alt.value("width"), text="label:N")
    )
    break_band = (
        alt.Chart(alt.NamedData(name="breaks"))
        .mark_rect(opacity=0.12, color="#333")
        .encode(x="lo:Q", x2="hi:Q", tooltip=["label:N", "rps:Q", "lo:Q", "hi:Q"])
    )
    break_rule = (
        alt.Chart(alt.NamedData(name="breaks"))
        .mark_rule(color="#333", strokeWidth=1.5)
        .encode(x="rps:Q", tooltip=["label:N", "rps:Q"])
    )
    return _layer(break_band, band, lines, limits, above, below, break_rule).properties(
        width=_WIDTH, height=_HEIGHT, title="Latency against offered load (lost requests count)"
    )


def occupancy_chart() -> alt.LayerChart:
    """(b) slot occupancy and shed share (left axis), goodput (right axis) against offered rps."""
    x = alt.X("rps:Q", title="offered load [requests/s]", scale=alt.Scale(type="log"))
    shares = (
        alt.Chart(alt.NamedData(name="shares"))
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
                    domain=["occupancy", "lost share", "goodput"],
                    range=["#4c78a8", "#e45756", "#54a24b"],
                ),
            ),
            tooltip=["series:N", "rps:Q", alt.Tooltip("share:Q", format=".0%")],
        )
    )
    goodput = (
        alt.Chart(alt.NamedData(name="goodput"))
        .mark_line(strokeDash=[4, 3])
        .encode(
            x=x,
            y=alt.Y("rps_served:Q", title="goodput [requests/s]"),
            color=alt.Color("series:N", title=None),
            tooltip=["rps:Q", "rps_served:Q"],
        )
    )
    return _independent_y(_layer(shares, goodput)).properties(
        width=_WIDTH, height=_HEIGHT, title="Occupancy, losses and goodput"
    )


def tradeoff_chart() -> alt.LayerChart:
    """(c) total output tokens/s against tokens/s per user, one point per concurrency, band."""
    x = alt.X("per_user:Q", title="tokens/s per user", scale=alt.Scale(type="log"))
    y = alt.Y("total:Q", title="output tokens/s in total", scale=alt.Scale(type="log"))
    band = (
        alt.Chart(alt.NamedData(name="tradeoff"))
        .mark_area(opacity=0.18, color="#4c78a8")
        .encode(x=x, y=alt.Y("lo:Q"), y2="hi:Q", tooltip=["users:Q", "lo:Q", "hi:Q"])
    )
    line = (
        alt.Chart(alt.NamedData(name="tradeoff"))
        .mark_line(point=alt.OverlayMarkDef(size=30), color="#4c78a8")
        .encode(
            x=x, y=y, order="users:Q", tooltip=["users:Q", "per_user:Q", "total:Q", "ttft_ms:Q"]
        )
    )
    labels = (
        alt.Chart(alt.NamedData(name="tradeoff"))
        .mark_text(dy=-9, fontSize=10, color="#333")
        .encode(x=x, y=y, text="users:Q")
    )
    return _layer(band, line, labels).properties(
        width=_WIDTH, height=_HEIGHT, title="Throughput against speed per user (labels: users)"
    )


def timeline_chart() -> alt.FacetChart:
    """(d) queue depth, occupancy, p99 TTFT and lost requests, second by second, at the break."""
    # (annotated: altair's mark_* methods hide their return type)
    faceted: alt.FacetChart = (
        alt.Chart(alt.NamedData(name="timeline"))
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
                "metric:N",
                title=None,
                sort=["queue depth", "occupancy", "p99 TTFT [ms]", "requests lost"],
            )
        )
    )
    return _independent_y(faceted).properties(title="At the breaking point")


def health_chart() -> alt.FacetChart:
    """Scenario pages: each node's utilization, queue, p99 and error budget per second."""
    # (annotated: altair's mark_* methods hide their return type)
    faceted: alt.FacetChart = (
        alt.Chart(alt.NamedData(name="health"))
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
    )
    return _independent_y(faceted).properties(title="Per-node health over time")


BUILDERS = {
    "breaking": breaking_chart,
    "occupancy": occupancy_chart,
    "tradeoff": tradeoff_chart,
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


def _breaks(row: ResultRow, lim: Limits) -> list[dict[str, Any]]:
    """The breaking rate with its band, named by its rule."""
    if row.breaking_rps is None:
        return []
    lo, hi = row.breaking_rps_low, row.breaking_rps_high
    label = f"breaks: {RULE_LABELS.get(row.breaking_rule or '', '')}"
    return [
        {
            "label": label,
            "rps": _sig(row.breaking_rps),
            "lo": _sig(lo or row.breaking_rps),
            "hi": _sig(hi or row.breaking_rps),
        }
    ]


def _latency(row: ResultRow, c: Curves, lim: Limits) -> dict[str, list[dict[str, Any]]]:
    """Latency percentiles over every offered request.

    A lost request makes one infinite, and the chart leaves such points out
    rather than draw them lower.
    """
    series = (
        ("TTFT p50", c.ttft_p50_ms),
        ("TTFT p99", c.ttft_p99_ms),
        ("latency p99", c.e2e_p99_ms),
    )
    latency = [
        {"series": name, "rps": _sig(x), "ms": _sig(y)}
        for name, ys in series
        for x, y in zip(c.load_rps, ys, strict=True)
        if y is not None and y > 0
    ]
    # The band: the rates at which the same p99 would be reached if the engine
    # were band % optimistic or pessimistic about capacity.
    k = (row.serving_band_pct or 0) / 100
    band = [
        {"rps": _sig(x), "lo": _sig(y * (1 - k)), "hi": _sig(y * (1 + k))}
        for x, y in zip(c.load_rps, c.e2e_p99_ms, strict=True)
        if y is not None and y > 0
    ]
    limits = [
        {
            "kind": "slo",
            "label": f"p99 SLO {text.seconds(lim.p99_slo_ms / 1000)}",
            "ms": lim.p99_slo_ms,
        },
        {
            "kind": "ttft",
            "label": f"TTFT budget {text.seconds(lim.ttft_budget_ms / 1000)}",
            "ms": lim.ttft_budget_ms,
        },
    ]
    return {"latency": latency, "latency_band": band, "limits": limits, "breaks": _breaks(row, lim)}


def _occupancy(c: Curves) -> dict[str, list[dict[str, Any]]]:
    series = (("occupancy", c.occupancy), ("lost share", c.lost_share))
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


def _tradeoff(row: ResultRow, c: Curves) -> dict[str, list[dict[str, Any]]]:
    k = (row.serving_band_pct or 0) / 100
    return {
        "tradeoff": [
            {
                "users": u,
                "per_user": _sig(per),
                "total": _sig(total),
                "lo": _sig(total * (1 - k)),
                "hi": _sig(total * (1 + k)),
                "ttft_ms": _sig(ttft),
            }
            for u, per, total, ttft in zip(
                c.users, c.table_tokens_per_user, c.table_output_tps, c.table_ttft_ms, strict=True
            )
            if per > 0 and total > 0
        ]
    }


def _timeline(c: Curves) -> dict[str, list[dict[str, Any]]]:
    series = (
        ("queue depth", c.timeline_queue_depth),
        ("occupancy", c.timeline_occupancy),
        ("p99 TTFT [ms]", c.timeline_ttft_p99_ms),
        ("requests lost", c.timeline_lost),
    )
    rows = [
        {"metric": name, "t": _sig(t), "value": _sig(v)}
        for name, ys in series
        for t, v in zip(c.timeline_s, ys, strict=True)
        if v is not None
    ]
    return {"timeline": rows}


def datasets_for(row: ResultRow, curves: Curves | None, lim: Limits) -> dict[str, Any]:
    """Per-kind named datasets for one config; kinds without data are left out."""
    if curves is None:
        return {}
    out: dict[str, Any] = {}
    if curves.load_rps:
        out["breaking"] = _latency(row, curves, lim)
        out["occupancy"] = _occupancy(curves)
    if curves.users:
        out["tradeoff"] = _tradeoff(row, curves)
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
