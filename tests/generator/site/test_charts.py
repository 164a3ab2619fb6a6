"""Chart specs: built once, data bound by name, and stable through JSON."""

from __future__ import annotations

import json

import altair as alt
import pytest
from backpressure.catalog.loader import load_catalog
from backpressure.generator.site import charts
from backpressure.generator.site.chart_pack import pack, unpack
from backpressure.generator.site.pages import Limits

from tests.generator.fixtures import _curves, make_rows

LIM = Limits.of(load_catalog())

ROUND_TRIP = {
    "breaking": alt.LayerChart,
    "occupancy": alt.LayerChart,
    "tradeoff": alt.LayerChart,
    "timeline": alt.FacetChart,
    "health": alt.FacetChart,
    "cost": alt.LayerChart,
}


@pytest.fixture(scope="module")
def fitting(cat):
    rows = make_rows(cat=cat)
    row = next(r for r in rows if r.config_id == "rtx-4090--llama-3.1-8b--q4_k_m--8k")
    return row, _curves(row)


@pytest.mark.parametrize("kind", charts.KINDS)
def test_builder_spec_survives_json_round_trip(kind):
    chart = charts.BUILDERS[kind]()
    text = chart.to_json()
    assert ROUND_TRIP[kind].from_json(text).to_json() == text


@pytest.mark.parametrize("kind", charts.KINDS[:4])
def test_spec_with_page_data_survives_json_round_trip(kind, fitting):
    row, curves = fitting
    data = charts.datasets_for(row, curves, LIM)
    spec = charts.with_data(charts.chart_specs()[kind], data[kind])
    chart = ROUND_TRIP[kind].from_dict(spec)
    again = ROUND_TRIP[kind].from_json(chart.to_json())
    assert again.to_dict() == chart.to_dict()
    assert json.loads(chart.to_json())["datasets"] == data[kind]


def test_specs_carry_no_data_and_name_every_dataset():
    specs = charts.chart_specs()
    assert charts.chart_specs() is specs  # built once per process
    for kind, spec in specs.items():
        text = json.dumps(spec)
        assert '"values"' not in text, kind
        assert "datasets" not in spec, kind


def test_datasets_match_the_names_the_specs_read(fitting):
    row, curves = fitting
    data = charts.datasets_for(row, curves, LIM)
    for kind, spec in charts.chart_specs().items():
        if kind not in data:
            continue
        named = set()

        def walk(node, named=named):
            if isinstance(node, dict):
                if isinstance(node.get("data"), dict) and "name" in node["data"]:
                    named.add(node["data"]["name"])
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(spec)
        assert named == set(data[kind]), kind


def test_breaking_chart_draws_band_limits_and_rule(fitting):
    row, curves = fitting
    d = charts.datasets_for(row, curves, LIM)["breaking"]
    assert {x["series"] for x in d["latency"]} == {"TTFT p50", "TTFT p99", "latency p99"}
    assert all(b["lo"] <= b["hi"] for b in d["latency_band"])
    # the limits are the settings', not numbers typed in the chart code
    assert [x["ms"] for x in d["limits"]] == [LIM.p99_slo_ms, LIM.ttft_budget_ms]
    # a percentile made infinite by a lost request is left out, never drawn lower
    assert all(x["ms"] > 0 for x in d["latency"])
    (rule,) = d["breaks"]
    assert rule["lo"] < rule["rps"] < rule["hi"]
    marks = json.dumps(charts.chart_specs()["breaking"])
    assert '"type": "area"' in marks or '"area"' in marks
    assert '"log"' in marks


def test_non_fitting_config_has_no_chart_data(cat):
    row = next(r for r in make_rows(cat=cat) if not r.fits)
    assert charts.datasets_for(row, _curves(row), LIM) == {}
    assert charts.datasets_for(row, None, LIM) == {}


def test_fixed_width_replaces_container_for_static_rendering():
    spec = charts.with_data(charts.chart_specs()["timeline"], {"timeline": []}, width=500)
    assert spec["spec"]["width"] == 500
    spec = charts.with_data(charts.chart_specs()["breaking"], {}, width=500)
    assert spec["width"] == 500


def test_packed_datasets_unpack_to_the_rows_and_are_a_fraction_of_their_size(fitting):
    row, curves = fitting
    data = charts.datasets_for(row, curves, LIM)
    packed = pack(data)
    assert packed.keys() == data.keys()
    for kind, sets in data.items():
        for name, rows in sets.items():
            assert unpack(packed[kind][name]) == rows, (kind, name)
    assert len(json.dumps(packed)) < 0.4 * len(json.dumps(data))
    # text columns travel as runs: a series name is written once per run
    latency = packed["breaking"]["latency"]["c"]["series"]["runs"]
    assert [name for name, _ in latency] == ["TTFT p50", "TTFT p99", "latency p99"]


def test_packing_refuses_rows_of_different_shapes():
    assert unpack(pack({"k": {"empty": []}})["k"]["empty"]) == []
    with pytest.raises(ValueError, match="differ"):
        pack({"k": {"d": [{"a": 1}, {"b": 2}]}})


def test_shared_x_values_travel_once(fitting):
    row, curves = fitting
    packed = pack(charts.datasets_for(row, curves, LIM))
    occupancy = packed["occupancy"]["shares"]["c"]["rps"]
    assert occupancy == {"cycle": [float(f"{x:.4g}") for x in curves.load_rps]}


def test_a_timeline_s_seconds_travel_as_a_sequence_and_whole_numbers_as_integers(fitting):
    row, curves = fitting
    data = charts.datasets_for(row, curves, LIM)
    packed = pack(data)
    timeline = packed["timeline"]["timeline"]
    seconds = [r["t"] for r in data["timeline"]["timeline"]]
    period = len(set(seconds))
    assert timeline["c"]["t"] == {"seq": [seconds[0], seconds[1] - seconds[0], period]}
    assert unpack(timeline) == data["timeline"]["timeline"]
    text = json.dumps(packed)
    assert "0.0," not in text  # 0, not 0.0
    assert ".0]" not in text


def test_only_exact_even_steps_become_a_sequence():
    def column(values):
        return pack({"k": {"d": [{"x": v} for v in values]}})["k"]["d"]["c"]["x"]

    assert column([2.5 * k for k in range(10)]) == {"seq": [0, 2.5, 10]}
    assert column([3 * k for k in range(7)]) == [0, 3, 6, 9, 12, 15, 18]  # short: a list
    # 0.1 steps are not exact in binary: 0.1 * 3 is not 0.3, so the values stay as written
    tenths = [round(0.1 * k, 1) for k in range(10)]
    assert column(tenths) == tenths
    assert column([0, 1, 2, 3, 4, 5, 6, 8]) == [0, 1, 2, 3, 4, 5, 6, 8]
    assert column([1.0, None, 3.0] * 3) == [1, None, 3] * 3
