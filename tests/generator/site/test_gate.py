"""The last gate: a build that would publish NaN, infinity or a negative rate fails, naming it."""

from __future__ import annotations

import dataclasses
import math
import subprocess

import pytest
from backpressure.generator.cli.main import main
from backpressure.generator.site import gate
from backpressure.generator.site.publish.assemble import SiteError

from tests.generator.fixtures import _curves, make_rows, write_fixture, write_sweep

FIT = "rtx-4090--llama-3.1-8b--q4_k_m--8k"


@pytest.fixture(scope="module")
def built(tmp_path_factory, cat):
    base = tmp_path_factory.mktemp("gate")
    write_fixture(base / "sweep", cat=cat)
    assert main(["build", "--results", str(base / "sweep"), "--out", str(base / "site")]) == 0
    return base, make_rows(cat=cat)


@pytest.fixture
def project(built, tmp_path, capsys):
    base, rows = built
    subprocess.run(["cp", "-a", f"{base}/.", str(tmp_path)], check=True)
    capsys.readouterr()
    snapshot = {p: p.read_bytes() for p in (tmp_path / "site").rglob("*") if p.is_file()}
    return tmp_path, rows, snapshot


@pytest.mark.parametrize(
    ("field", "value", "expect"),
    [
        (
            "decode_tokens_per_s",
            math.nan,
            "field decode_tokens_per_s is nan (must be a finite number)",
        ),
        ("p99_break_rps", math.inf, "field p99_break_rps is inf"),
        (
            "saturation_rps",
            -51466.0,
            "field saturation_rps is -51466.0 (must be between 0 and inf)",
        ),
        ("slots", -1, "field slots is -1"),
        ("error_band_pct", 250, "field error_band_pct is 250 (must be between 0 and 100)"),
    ],
)
def test_a_bad_number_in_a_row_publishes_nothing(project, capsys, field, value, expect):
    root, rows, before = project
    bad = [dataclasses.replace(r, **{field: value}) if r.config_id == FIT else r for r in rows]
    write_sweep(root / "sweep", bad, [_curves(r) for r in rows])
    code = main(["build", "--results", str(root / "sweep"), "--out", str(root / "site")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1, err
    assert f"config {FIT}: {expect}" in err
    assert {p: p.read_bytes() for p in (root / "site").rglob("*") if p.is_file()} == before


def test_a_nan_in_the_chart_data_publishes_nothing(project, capsys):
    root, rows, before = project
    curves = []
    for r in rows:
        c = _curves(r)
        if r.config_id == FIT:
            c = dataclasses.replace(c, occupancy=(math.nan, *c.occupancy[1:]))
        curves.append(c)
    write_sweep(root / "sweep", rows, curves)
    code = main(["build", "--results", str(root / "sweep"), "--out", str(root / "site")])
    err = capsys.readouterr().err
    assert code == 2
    assert f"config {FIT}: chart data: occupancy." in err
    assert "is nan (must be a finite number)" in err
    assert {p: p.read_bytes() for p in (root / "site").rglob("*") if p.is_file()} == before


def test_a_field_the_sweep_adds_later_is_checked_by_its_name():
    assert gate.bounds("breaking_rps") == (0, math.inf)  # a rate: never negative
    assert gate.bounds("queue_wait_ms") == (0, math.inf)
    assert gate.bounds("some_new_score") == (-math.inf, math.inf)  # unknown: finite only
    assert gate.problem("some_new_score", math.nan)
    assert gate.problem("kv_budget_bytes", -5) is None  # negative when the weights do not fit
    assert gate.problem("fits", True) is None


def test_nested_data_names_the_path():
    with pytest.raises(SiteError, match=r"x: health.value: field value is inf"):
        gate.check_data("x", {"health": [{"t": 1.0, "value": math.inf}]})
