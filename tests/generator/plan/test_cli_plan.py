"""`backpressure plan` as a user runs it: JSON, determinism, bad input, misses, recomputing."""

from __future__ import annotations

import json

import pytest
from backpressure.generator.cli.main import main
from backpressure.generator.plan import resweep

from tests.generator.plan.conftest import MODEL

ROW_KEYS = {
    "device",
    "quant",
    "context",
    "replicas",
    "breaking_rps",
    "breaking_rps_low",
    "breaking_rps_high",
    "breaking_rule",
    "band_pct",
    "band_reason",
    "usd_per_hour",
    "usd_per_hour_total",
    "usd_per_million_output_tokens",
    "price_source",
    "price_as_of",
}


def run(capsys, small, *args, sweep=True):
    argv = ["plan", *args, "--catalog", str(small.root)]
    if sweep:
        argv += ["--sweep", str(small.sweep)]
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def no_compute(monkeypatch):
    """Fail the test if the planner computes a config instead of reading the sweep."""

    def refuse(*args, **kwargs):
        raise AssertionError("the planner re-ran the sweep")

    monkeypatch.setattr(resweep, "compute", refuse)


def test_json_plans_hold_the_promised_fields(capsys, small, no_compute):
    code, out, _ = run(
        capsys, small, "--model", MODEL, "--rps", "10", "--context", "8192", "--json"
    )
    assert code == 0
    data = json.loads(out)
    assert data["mode"] == "plan"
    assert data["met"] is True
    assert data["context"] == 8192
    assert data["rates"] == {"source": "sweep", "why": [], "configs_computed": 0}
    assert data["plans"]
    for row in data["plans"]:
        assert set(row) >= ROW_KEYS
        assert row["context"] == 8192
        assert row["replicas"] >= 1
        assert row["replicas"] * row["breaking_rps_low"] >= 10 * (1 - 1e-9)
    totals = [r["usd_per_hour_total"] for r in data["plans"] if r["usd_per_hour_total"] is not None]
    assert totals == sorted(totals)
    method = data["cost_method"]
    assert method["amortisation_years"] == small.cat.settings.amortisation_years
    assert method["electricity"]["as_of"] == small.cat.settings.electricity.as_of.isoformat()


def test_the_same_question_gives_the_same_bytes(capsys, small, no_compute):
    args = ("--model", MODEL, "--rps", "7.5", "--tpot-ms", "30", "--json")
    first = run(capsys, small, *args)
    second = run(capsys, small, *args)
    assert first == second
    human = run(capsys, small, "--model", MODEL, "--rps", "7.5")
    assert human == run(capsys, small, "--model", MODEL, "--rps", "7.5")


def test_the_table_for_people(capsys, small, no_compute):
    code, out, _ = run(capsys, small, "--model", MODEL, "--rps", "10", "--top", "2")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"{MODEL} at 10.0 requests/s, 2,048-token context"
    assert "read from the sweep" in out
    assert "more (--top 0 lists all)" in out
    assert "Replicas are counted from the low end of each band." in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--model", "llama-3.1-8c", "--rps", "5"), "unknown model 'llama-3.1-8c'; did you mean"),
        (("--model", MODEL, "--rps", "0"), "--rps must be a positive number"),
        (("--model", MODEL, "--rps", "-3"), "--rps must be a positive number"),
        (("--model", MODEL, "--rps", "nan"), "--rps must be a positive number"),
        (("--model", MODEL, "--rps", "inf"), "--rps must be a positive number"),
        (("--model", MODEL, "--rps", "abc"), "'abc' is not a valid float"),
        (("--model", MODEL), "--model needs --rps R"),
        ((), "give --model ID with --rps R, or --device ID"),
        (("--model", MODEL, "--rps", "5", "--context", "200000"), "above llama-3.1-8b's maximum"),
        (("--model", MODEL, "--rps", "5", "--context", "1000"), "exceed --context (1,000)"),
        (("--model", MODEL, "--rps", "5", "--tpot-ms", "0"), "--tpot-ms must be a positive"),
        (("--model", MODEL, "--rps", "5", "--max-per-hour", "-1"), "--max-per-hour must be"),
        (("--model", MODEL, "--rps", "5", "--output-tokens", "1"), "at least 2"),
        (("--model", MODEL, "--rps", "5", "--quant", "q4_k_n"), "unknown quant 'q4_k_n'"),
        (("--device", "rtx-4091"), "unknown GPU or rig 'rtx-4091'; did you mean rtx-4090"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, small, args, message):
    code, out, err = run(capsys, small, *args)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("backpressure: error: ")
    assert message in err


def test_a_sweep_dir_without_results_is_refused(capsys, small, tmp_path):
    code = main(["plan", "--model", MODEL, "--rps", "5", "--sweep", str(tmp_path)])
    _, err = capsys.readouterr()
    assert code == 2
    assert "no results.csv in it" in err


def test_an_unmet_target_says_so_names_the_closest_and_exits_1(capsys, small, no_compute):
    code, out, _ = run(capsys, small, "--model", MODEL, "--rps", "5", "--tpot-ms", "0.5")
    assert code == 1
    assert "No catalog device, rig or quant meets this target. The closest:" in out
    closest = [line for line in out.splitlines() if "with one user, over 0.5 ms" in line]
    assert len(closest) == 3
    code, out, _ = run(capsys, small, "--model", MODEL, "--rps", "5", "--tpot-ms", "0.5", "--json")
    data = json.loads(out)
    assert code == 1
    assert data["met"] is False
    assert data["plans"] == []
    assert [r["breaking_rps_low"] for r in data["closest"]] == sorted(
        (r["breaking_rps_low"] for r in data["closest"]), reverse=True
    )


def test_a_device_question(capsys, small, no_compute):
    code, out, _ = run(capsys, small, "--device", "rtx-4090", "--rps", "4", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["mode"] == "device"
    pairs = [(r["model"], r["context"]) for r in data["best"]]
    assert (MODEL, 8192) in pairs
    assert pairs == sorted(pairs)
    assert {m for m, _ in pairs} == set(small.cat.models)
    for row in data["best"]:
        assert row["gpu"] == "rtx-4090"
        assert row["replicas"] >= 1
    code, out, _ = run(capsys, small, "--device", "rtx-4090")
    assert code == 0
    assert out.startswith("rtx-4090: what it serves best, per model and context")


def test_another_profile_is_computed_and_says_so(capsys, small):
    args = ("--model", MODEL, "--rps", "2", "--device", "rtx-4090", "--quant", "q4_k_m")
    code, out, err = run(capsys, small, *args, "--output-tokens", "256", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["rates"]["source"] == "computed"
    assert data["rates"]["configs_computed"] == 1
    assert data["rates"]["why"][0].startswith("the request profile differs from the sweep's")
    assert data["profile"]["output_tokens"] == 256
    assert "plan: computing 1 configs as the sweep does" in err
    assert "plan: computed 1 configs in" in err
    [row] = data["plans"]
    code, out, _ = run(capsys, small, *args, "--json")
    [swept] = json.loads(out)["plans"]
    # Computed afresh for the longer profile, not read from the sweep; twice the output
    # cannot serve clearly more (at this fixture's short runs the two rates differ by
    # less than their arrival-noise band, so only the bands are compared).
    assert row["breaking_rps"] != swept["breaking_rps"]
    assert row["breaking_rps_low"] <= swept["breaking_rps_high"]


def test_without_a_sweep_the_configs_are_computed(capsys, small, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no site.sweep or build/sweep here
    args = ("--model", MODEL, "--rps", "2", "--device", "rtx-4090", "--quant", "q4_k_m")
    code, out, err = run(capsys, small, *args, sweep=False)
    assert code == 0
    assert "no sweep output was found" in err
    assert "computed for this question (1 config simulated as the sweep does)" in out
