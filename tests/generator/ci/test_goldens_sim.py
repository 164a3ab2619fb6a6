"""Frozen simulation runs: any change to these bytes changes a published verdict.

Regenerate only on purpose, with ``backpressure goldens --update`` (docs/simulation.md,
"Goldens"), and say in the commit why the old numbers were wrong. The last test
checks that the command writes these same bytes.
"""

import difflib
import json
from pathlib import Path

import pytest
from backpressure.generator.ci import goldens
from backpressure.generator.cli.simulate import simulate_command
from backpressure.generator.paths import ROOT as ROOT_DIR
from click.testing import CliRunner

ROOT = ROOT_DIR
GOLDENS = ROOT / "goldens"
SCENARIOS = ROOT / "catalog" / "scenarios"


def _same(got: str, path: Path) -> None:
    want = path.read_text(encoding="utf-8")
    if got != want:
        diff = difflib.unified_diff(
            want.splitlines(), got.splitlines(), str(path), "now", lineterm="", n=1
        )
        pytest.fail("golden differs:\n" + "\n".join(list(diff)[:60]))


def _cli(*args: str) -> str:
    result = CliRunner().invoke(simulate_command, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_app_postgres_sweep_breaks_at_1500_rps():
    out = _cli(str(SCENARIOS / "app-postgres.yaml"), "--sweep", "--json")
    doc = json.loads(out)
    assert doc["breaking_rps"] == 1500.0
    assert doc["failing_node"] == "postgres"
    assert doc["failing_rule"] == "p99"
    assert doc["bottleneck"].startswith("postgres: pool ")
    assert "at 1,500 rps; p99 " in doc["bottleneck"]
    assert doc["bottleneck"].endswith(" over the 500 ms SLO")
    _same(out, GOLDENS / "app-postgres.sweep.json")


def test_app_postgres_tick_file_is_frozen(tmp_path):
    path = tmp_path / "ticks.csv"
    _cli(
        str(SCENARIOS / "app-postgres.yaml"),
        "--seed",
        "1",
        "--rps",
        "1500",
        "--duration",
        "60",
        "--ticks",
        str(path),
    )
    _same(path.read_text(encoding="utf-8"), GOLDENS / "app-postgres.ticks.csv")


def test_llm_rig_sweep_is_frozen():
    pytest.importorskip("generator.resolve", reason="waits for the capacity engine's resolver")
    out = _cli(str(SCENARIOS / "llm-7b-q4-24gb.yaml"), "--sweep", "--json")
    _same(out, GOLDENS / "llm-7b-q4-24gb.sweep.json")


def test_llm_rig_tick_file_is_frozen(tmp_path):
    pytest.importorskip("generator.resolve", reason="waits for the capacity engine's resolver")
    path = tmp_path / "ticks.csv"
    _cli(
        str(SCENARIOS / "llm-7b-q4-24gb.yaml"),
        "--seed",
        "1",
        "--rps",
        "10",
        "--duration",
        "60",
        "--ticks",
        str(path),
    )
    _same(path.read_text(encoding="utf-8"), GOLDENS / "llm-7b-q4-24gb.ticks.csv")


def test_the_goldens_command_writes_these_same_files(cat):
    for name in goldens.SIM_RUNS:
        scenario = name
        _same(goldens.sim_ticks_csv(cat, scenario), GOLDENS / f"{name}.ticks.csv")
    assert set(goldens.GENERATORS) >= {f"{n}.sweep.json" for n in goldens.SIM_RUNS}
