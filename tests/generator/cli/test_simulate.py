"""``backpressure simulate``: thin command over generator.simulate."""

import json

import pytest
from backpressure.generator.cli.simulate import simulate_command
from backpressure.generator.paths import ROOT as ROOT_DIR
from click.testing import CliRunner

ROOT = ROOT_DIR
APP_PG = str(ROOT / "catalog" / "scenarios" / "app-postgres.yaml")


def invoke(*args):
    return CliRunner().invoke(simulate_command, list(args), catch_exceptions=False)


def test_human_output_shows_health_bars_and_the_bottleneck():
    r = invoke(APP_PG, "--rps", "1000", "--duration", "30")
    assert r.exit_code == 0
    lines = r.output.splitlines()
    assert lines[0].startswith("app-postgres: 1,000 rps for 30 s, seed 1")
    assert any(line.startswith("postgres") and "[" in line and "%" in line for line in lines)
    assert lines[-1].startswith("PASS: postgres: pool ")


def test_json_run_has_verdict_and_nodes():
    doc = json.loads(invoke(APP_PG, "--rps", "1700", "--duration", "30", "--json").output)
    assert doc["passed"] is False
    assert doc["failing_node"] == "postgres"
    assert set(doc["nodes"]) == {"app", "postgres"}
    assert doc["seed"] == 1


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_tick_file_is_byte_identical_per_seed_and_differs_across_seeds(tmp_path, suffix):
    paths = [tmp_path / f"{name}{suffix}" for name in ("a", "b", "c")]
    for path, seed in zip(paths, ("3", "3", "4"), strict=True):
        invoke(APP_PG, "--seed", seed, "--rps", "1400", "--duration", "5", "--ticks", str(path))
    a, b, c = (p.read_bytes() for p in paths)
    assert a == b
    assert a != c
    lines = a.decode().splitlines()
    assert lines[0] == "# scenario app-postgres; seed 3; rps 1,400; duration 5 s; tick 100 ms"
    assert len(lines) == 1 + (suffix == ".csv") + 2 * 50
    if suffix == ".jsonl":
        row = json.loads(lines[1])
        assert row["node"] == "app"
        assert row["tick"] == 0


def test_sweep_json_names_the_breaking_point():
    doc = json.loads(invoke(APP_PG, "--sweep", "--json", "--duration", "20").output)
    assert {"breaking_rps", "bottleneck", "failing_node", "failing_rule"} <= set(doc)
    assert len(doc["points"]) == 40


def test_sweep_human_ends_with_the_breaking_line():
    r = invoke(APP_PG, "--sweep", "--duration", "20")
    assert r.output.splitlines()[-1].startswith("breaks at ")


def test_sweep_rejects_a_fixed_level():
    r = CliRunner().invoke(simulate_command, [APP_PG, "--sweep", "--rps", "5"])
    assert r.exit_code == 2
    assert "--sweep" in r.output


def test_bad_scenario_prints_one_line_per_problem_and_exits_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "id: bad\nname: x\nduration_s: 60\nload: {rps: 1}\nsweep: {start_rps: 1, step_rps: 1}\n"
        "nodes:\n  - {name: a, part: nope}\n  - {name: b, part: app-tier, after: zz}\n",
        encoding="utf-8",
    )
    r = CliRunner().invoke(simulate_command, [str(bad)])
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 2
    assert all(line.startswith(f"backpressure: error: {bad}: entry ") for line in lines)
    assert "Traceback" not in r.output


def test_malformed_yaml_exits_2(tmp_path):
    bad = tmp_path / "m.yaml"
    bad.write_text("nodes: [\n", encoding="utf-8")
    r = CliRunner().invoke(simulate_command, [str(bad)])
    assert r.exit_code == 2
    assert "malformed YAML" in r.output


def test_unresolvable_llm_is_a_scenario_error(tmp_path):
    bad = tmp_path / "g.yaml"
    bad.write_text(
        "id: g\nname: x\nduration_s: 10\nload: {rps: 1}\nsweep: {start_rps: 1, step_rps: 1}\n"
        "nodes:\n  - {name: m, part: llm-server, gpu: no-such-gpu, params_b: 7, quant: q4_k_m,"
        " context: 8192}\n",
        encoding="utf-8",
    )
    r = CliRunner().invoke(simulate_command, [str(bad)])
    assert r.exit_code == 2
    assert "entry 'm'" in r.output or "entry m" in r.output
    assert "no-such-gpu" in r.output


def test_registered_in_the_main_cli():
    from backpressure.generator.cli.main import cli

    assert cli.commands["simulate"] is simulate_command
