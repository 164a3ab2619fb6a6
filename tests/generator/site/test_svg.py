"""The static chart sketches: relative path data that draws the points it was given."""

from __future__ import annotations

import re

from backpressure.generator.site.svg import path_data, sketch


def _absolute(d: str) -> list[tuple[int, int]]:
    """Decode M/h/v/l path data (implicit repeats included) back to points."""
    tokens = re.findall(r"[A-Za-z]|-?\d+", d)
    pts: list[tuple[int, int]] = []
    cmd, i, x, y = "", 0, 0, 0
    while i < len(tokens):
        if tokens[i].isalpha():
            cmd, i = tokens[i], i + 1
            assert cmd in "Mhvl", cmd  # the only commands path_data writes
        if cmd == "M":
            x, y, i = int(tokens[i]), int(tokens[i + 1]), i + 2
        elif cmd == "h":
            x, i = x + int(tokens[i]), i + 1
        elif cmd == "v":
            y, i = y + int(tokens[i]), i + 1
        else:
            x, y, i = x + int(tokens[i]), y + int(tokens[i + 1]), i + 2
        pts.append((x, y))
    return pts


def test_path_data_round_trips_the_points():
    pts = [(34, 111), (41, 111), (44, 186), (47, 111), (51, 186), (54, 110), (54, 120), (60, 8)]
    d = path_data(pts)
    assert d == "M34 111h7l3 75 3-75 4 75 3-76v10l6-112"
    assert _absolute(d) == pts


def test_sketch_draws_each_series_as_a_path():
    rows = [{"s": "occupancy", "x": float(i), "y": float(i % 3)} for i in range(50)]
    svg = sketch(rows, "s", "x", "y", False, False, "demo")
    assert "<polyline" not in svg
    [d] = re.findall(r'<path d="([^"]+)" fill="none" stroke="#4c78a8"', svg)
    xs = [p[0] for p in _absolute(d)]
    assert xs == sorted(xs)
    assert (xs[0], xs[-1]) == (34, 632)
