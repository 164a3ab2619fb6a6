"""Small hand-built SVGs: the static chart fallback and the embeddable badge.

A full Vega render of three charts costs about 150 ms per config (vl-convert),
which at twenty thousand configs is most of an hour; these sketches cost well
under a millisecond and keep the page readable without JavaScript.
"""

from __future__ import annotations

import math
from typing import Any

from markupsafe import escape

W, H, PAD = 640, 220, 34
COLORS = {
    "TTFT p50": "#4c78a8",
    "TTFT p99": "#f58518",
    "latency p99": "#e45756",
    "occupancy": "#4c78a8",
    "lost share": "#e45756",
    "goodput": "#54a24b",
    "queue depth": "#e45756",
    "p99 TTFT [ms]": "#f58518",
    "requests lost": "#b279a2",
    "throughput": "#4c78a8",
}


def _scale(lo: float, hi: float, log: bool, a: float, b: float) -> Any:
    if log:
        lo, hi = math.log10(max(lo, 1e-9)), math.log10(max(hi, 1e-9))
    span = (hi - lo) or 1.0

    def f(v: float) -> float:
        v = math.log10(max(v, 1e-9)) if log else v
        return a + (v - lo) / span * (b - a)

    return f


def _series(
    rows: list[dict[str, Any]], key: str, x: str, y: str
) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        out.setdefault(str(r[key]), []).append((float(r[x]), float(r[y])))
    return out


def _outline(points: list[tuple[float, float]]) -> list[tuple[int, int]]:
    """Whole-pixel points, without the inner points of a flat stretch (they draw nothing)."""
    px = [(round(a), round(b)) for a, b in points]
    return [
        p
        for i, p in enumerate(px)
        if i in (0, len(px) - 1) or not px[i - 1][1] == p[1] == px[i + 1][1]
    ]


def _num(v: int, after: str) -> str:
    """``v`` written after ``after``: a minus sign separates it on its own."""
    return f"{v}" if v < 0 or not after[-1].isdigit() else f" {v}"


def path_data(points: list[tuple[int, int]]) -> str:
    """SVG path data through ``points`` in relative steps: the shortest text for a sketch.

    Flat and upright steps are ``h`` and ``v``; a repeated command letter is
    left out, as the path grammar allows. It draws what a polyline of the same
    points draws.
    """
    (x, y), rest = points[0], points[1:]
    out = f"M{x} {y}"
    last = "M"
    for a, b in rest:
        dx, dy = a - x, b - y
        x, y = a, b
        if dy == 0:
            cmd, args = "h", [dx]
        elif dx == 0:
            cmd, args = "v", [dy]
        else:
            cmd, args = "l", [dx, dy]
        if cmd != last:
            out += cmd
            last = cmd
        for v in args:
            out += _num(v, out)
    return out


def sketch(
    rows: list[dict[str, Any]], key: str, x: str, y: str, logx: bool, logy: bool, label: str
) -> str:
    """A minimal line chart of ``rows`` grouped by ``key``: one polyline per series, a legend."""
    series = _series(rows, key, x, y)
    pts = [p for s in series.values() for p in s]
    if not pts:
        return ""
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    fx = _scale(min(xs), max(xs), logx, PAD, W - 8)
    fy = _scale(min(ys), max(ys), logy, H - PAD, 8)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" role="img" '
        f'aria-label="{escape(label)}" class="bp-sketch">',
        f'<path d="M{PAD} 8V{H - PAD}H{W - 8}" fill="none" stroke="#999"/>',
    ]
    for i, (name, s) in enumerate(series.items()):
        color = COLORS.get(name, "#666")
        line = path_data(_outline([(fx(a), fy(b)) for a, b in s]))
        parts.append(f'<path d="{line}" fill="none" stroke="{color}" stroke-width="2"/>')
        parts.append(
            f'<text x="{PAD + 6 + 150 * i}" y="{H - 8}" font-size="12" fill="{color}">'
            f"{escape(name)}</text>"
        )
    axis = "log " if logx else ""
    parts.append(
        f'<text x="{W - 8}" y="{H - 8}" font-size="11" text-anchor="end" fill="#666">'
        f"{escape(axis + x)}: {min(xs):.3g} to {max(xs):.3g}</text></svg>"
    )
    return "".join(parts)


def fallbacks(datasets: dict[str, Any]) -> dict[str, str]:
    """Static sketches of each chart kind present in ``datasets``."""
    out: dict[str, str] = {}
    if "breaking" in datasets:
        out["breaking"] = sketch(
            datasets["breaking"]["latency"],
            "series",
            "rps",
            "ms",
            True,
            True,
            "latency against offered load",
        )
    if "occupancy" in datasets:
        out["occupancy"] = sketch(
            datasets["occupancy"]["shares"],
            "series",
            "rps",
            "share",
            True,
            False,
            "occupancy and lost share",
        )
    if "tradeoff" in datasets:
        rows = [{**r, "series": "throughput"} for r in datasets["tradeoff"]["tradeoff"]]
        out["tradeoff"] = sketch(
            rows,
            "series",
            "per_user",
            "total",
            True,
            True,
            "total throughput against tokens/s per user",
        )
    if "timeline" in datasets:
        out["timeline"] = sketch(
            datasets["timeline"]["timeline"],
            "metric",
            "t",
            "value",
            False,
            False,
            "timeline at the breaking point",
        )
    return out


def badge(left: str, right: str, ok: bool) -> str:
    """A flat two-part badge, about 600 bytes; width estimated at 6.5 px per character."""
    lw, rw = 10 + round(6.5 * len(left)), 10 + round(6.5 * len(right))
    color = "#2e7d32" if ok else "#c62828"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{lw + rw}" height="20" role="img" '
        f'aria-label="{escape(left)}: {escape(right)}">'
        f'<rect width="{lw}" height="20" fill="#555"/>'
        f'<rect x="{lw}" width="{rw}" height="20" fill="{color}"/>'
        '<g fill="#fff" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">'
        f'<text x="5" y="14">{escape(left)}</text>'
        f'<text x="{lw + 5}" y="14">{escape(right)}</text></g></svg>\n'
    )
