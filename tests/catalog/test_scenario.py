"""Scenario loading: shipped files load; bad input names file, entry and field."""

from pathlib import Path

import pytest
from backpressure.catalog.errors import CatalogError
from backpressure.catalog.scenario import (
    PARTS_DIR,
    SCENARIOS_DIR,
    LlmPart,
    load_parts,
    load_scenario,
)

GOOD = """\
id: s
name: Test
duration_s: 60
load: {rps: 100}
nodes:
  - {name: app, part: app-tier}
  - {name: db, part: postgres, after: app}
sweep: {start_rps: 100, step_rps: 100}
"""


def write(tmp_path, text, stem="s"):
    path = tmp_path / f"{stem}.yaml"
    path.write_text(text.replace("id: s\n", f"id: {stem}\n", 1), encoding="utf-8")
    return path


def problems(path):
    with pytest.raises(CatalogError) as info:
        load_scenario(path)
    return info.value.problems


def test_every_shipped_scenario_and_part_loads():
    parts = load_parts()
    assert set(parts) >= {"app-tier", "postgres", "queue", "llm-server"}
    for path in sorted(SCENARIOS_DIR.glob("*.yaml")):
        loaded = load_scenario(path, parts)
        assert [n.name for n, _ in loaded.nodes]


def test_every_numeric_part_default_has_a_source():
    for part in load_parts(PARTS_DIR).values():
        for name, value in part:
            if isinstance(value, int | float) and not isinstance(value, bool):
                assert name in part.sources, (part.id, name)
                src = part.sources[name]
                assert src.startswith(("http", "assumption:")), (part.id, name)


def test_overrides_apply_and_are_sourced_to_the_scenario(tmp_path):
    text = GOOD.replace("after: app}", "after: app, pool_size: 40}")
    loaded = load_scenario(write(tmp_path, text))
    db = dict((n.name, p) for n, p in loaded.nodes)["db"]
    assert db.pool_size == 40
    assert db.sources["pool_size"] == "scenario s, node db"


def test_nodes_come_out_in_topological_order(tmp_path):
    app = "  - {name: app, part: app-tier}\n"
    text = GOOD.replace(app, "") + app
    text = text.replace("sweep: {start_rps: 100, step_rps: 100}\n", "") + (
        "sweep: {start_rps: 100, step_rps: 100}\n"
    )
    loaded = load_scenario(write(tmp_path, text))
    assert [n.name for n, _ in loaded.nodes] == ["app", "db"]


def test_malformed_yaml(tmp_path):
    (p,) = problems(write(tmp_path, "id: s\nnodes: [\n"))
    assert "malformed YAML" in p.message
    assert p.file.endswith("s.yaml")


@pytest.mark.parametrize(
    ("edit", "entry", "field", "words"),
    [
        (("duration_s: 60", "duration_s: 60\ncolour: red"), "s", "colour", "Extra inputs"),
        (("part: postgres", "part: mysql"), "db", "part", "unknown part"),
        (("after: app}", "after: web}"), "db", "nodes.1.after", "unknown node"),
        (("after: app}", "after: app, pool_sise: 3}"), "db", "pool_sise", "unknown field"),
        (("after: app}", "after: app, pool_size: -3}"), "db", "pool_size", "greater than 0"),
        (("load: {rps: 100}", "load: {rps: -1}"), "s", "load.rps", "greater than 0"),
        (
            ("duration_s: 60", "duration_s: 60\nslo: {availability: 1.5}"),
            "s",
            "slo.availability",
            "less than 1",
        ),
        (
            ("after: app}", "after: app, discipline: buffer, max_depth: 0}"),
            "db",
            "discipline",
            "max_depth",
        ),
        (
            ("{name: app, part: app-tier}", "{name: app, part: app-tier, after: db}"),
            "app",
            "after",
            "cycle: app -> db -> app",
        ),
        (
            ("name: app, part: app-tier", "name: load, part: app-tier"),
            "load",
            "nodes.0.name",
            "source",
        ),
    ],
)
def test_bad_input_names_file_entry_and_field(tmp_path, edit, entry, field, words):
    path = write(tmp_path, GOOD.replace(*edit))
    found = problems(path)
    assert any(p.entry == entry and p.field == field and words in p.message for p in found), found
    assert all(p.file == str(path) for p in found)


def test_llm_nodes_must_be_resolvable_and_be_leaves(tmp_path):
    text = GOOD.replace(
        "{name: db, part: postgres, after: app}",
        "{name: m, part: llm-server, after: app}\n  - {name: db, part: postgres, after: m}",
    )
    found = problems(write(tmp_path, text))
    fields = {(p.entry, p.field) for p in found}
    want = {("m", "gpu"), ("m", "quant"), ("m", "context"), ("m", "model"), ("m", "after")}
    assert want <= fields


def test_explicit_llm_capacity_needs_all_five_numbers(tmp_path):
    text = GOOD.replace(
        "{name: db, part: postgres, after: app}",
        "{name: m, part: llm-server, after: app, slots: 18}",
    )
    (p,) = problems(write(tmp_path, text))
    assert (p.entry, p.field) == ("m", "slots")
    full = GOOD.replace(
        "{name: db, part: postgres, after: app}",
        "{name: m, part: llm-server, after: app, slots: 18, "
        "prefill_tokens_per_s: 5000, step_fixed_s: 0.008, "
        "step_per_kv_token_s: 1.0e-7, step_compute_per_seq_s: 0.0004}",
    )
    loaded = load_scenario(write(tmp_path, full, "t"))
    part = loaded.nodes[1][1]
    assert isinstance(part, LlmPart)
    assert part.explicit


def test_users_and_think_time_set_the_level(tmp_path):
    text = GOOD.replace("load: {rps: 100}", "load: {users: 5000, think_time_s: 250}")
    assert load_scenario(write(tmp_path, text)).scenario.load.level_rps == 20.0
    both = GOOD.replace("load: {rps: 100}", "load: {rps: 3, users: 5000, think_time_s: 250}")
    assert problems(write(tmp_path, both, "u"))[0].field == "load.rps"


def test_id_must_equal_file_name(tmp_path):
    path = tmp_path / "other.yaml"
    path.write_text(GOOD, encoding="utf-8")
    assert problems(path)[0].field == "id"


def test_sweep_levels_are_exact():
    loaded = load_scenario(Path(SCENARIOS_DIR / "app-postgres.yaml"))
    assert loaded.scenario.sweep.levels()[14] == 1500
