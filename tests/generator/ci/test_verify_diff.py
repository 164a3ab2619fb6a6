"""`verify` catches a tampered number; `diff` reports what moved between catalogs."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
from backpressure.catalog.loader import load_catalog
from backpressure.generator.ci.diff import compare, markdown
from backpressure.generator.ci.verify import config_id_of
from backpressure.generator.cli.main import main
from backpressure.generator.keys import InputKeys
from backpressure.generator.results_io import read_results
from backpressure.generator.site.links import row_anchor
from backpressure.generator.site.model_api import model_json
from backpressure.generator.site.model_json import model_configs
from backpressure.generator.sweep.combos import enumerate_combos
from backpressure.generator.sweep.evaluate import evaluate
from backpressure.generator.sweep.run import run_sweep

from tests.generator.small_catalog import make_small_catalog

CID = "rtx-4090--llama-3.1-8b--q4_k_m--8k"


MODEL_JSON = "api/models/llama-3.1-8b.json"


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A site holding one model JSON of one config, computed from the bundled catalog."""
    cat = load_catalog()
    combo = next(c for c in enumerate_combos(cat) if c.id == CID)
    row, curves = evaluate(cat, combo, InputKeys(cat).fingerprint_key(combo))
    configs = model_configs(cat, [row], {CID: curves})["llama-3.1-8b"]
    site = tmp_path_factory.mktemp("site")
    (site / "api" / "models").mkdir(parents=True)
    (site / MODEL_JSON).write_text(model_json(cat, "llama-3.1-8b", configs), encoding="utf-8")
    return site


@pytest.mark.parametrize(
    "target",
    [
        CID,
        "/gpu/rtx-4090/llama-3.1-8b/q4_k_m/8k/",
        "https://example.org/x/gpu/rtx-4090/llama-3.1-8b/q4_k_m/8k/",
        "gpu/rtx-4090/llama-3.1-8b/q4_k_m/8k/index.html",
        "https://example.org/x/gpu/rtx-4090/llama-3.1-8b/#q4_k_m-8k",
    ],
)
def test_targets_name_their_config(target):
    assert config_id_of(target) == CID


def test_verify_matches_a_published_json(published, capsys):
    code = main(["verify", str(published / MODEL_JSON)])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith(f"verified: {CID}")


def test_a_site_without_an_index_is_exit_2(published, capsys):
    assert main(["verify", CID, "--site", str(published)]) == 2
    assert "not a published site" in capsys.readouterr().err


def test_verify_catches_tampering(published, tmp_path, capsys):
    data = json.loads((published / MODEL_JSON).read_text())
    data["configs"][0]["slots"] += 1
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(data))
    code = main(["verify", str(tampered)])
    out = capsys.readouterr().out
    assert code == 1
    assert "MISMATCH" in out
    assert [line.split()[:2] for line in out.splitlines()[2:]] == [[f"{CID}:", "slots"]]
    one = tmp_path / "one.json"  # one config's object, as a page would keep it
    one.write_text(json.dumps(data["configs"][0]))
    assert main(["verify", str(one)]) == 1
    assert f"{CID}: slots" in capsys.readouterr().out


def test_verify_rejects_nonsense(capsys):
    code = main(["verify", "not-a-config"])
    assert code == 2
    assert "neither a site directory, a config id" in capsys.readouterr().err


def test_diff_reports_a_moved_gpu(tmp_path, capsys):
    old = make_small_catalog(tmp_path / "a")
    new = tmp_path / "b" / "catalog"
    shutil.copytree(old, new)
    gpu = new / "gpus" / "rtx-4090.yaml"
    gpu.write_text(
        gpu.read_text().replace("memory_bytes: 25_769_803_776", "memory_bytes: 34_359_738_368")
    )
    code = main(["diff", str(old), str(new), "--work", str(tmp_path / "work"), "--jobs", "1"])
    out = capsys.readouterr().out
    assert code == 1
    assert "| `rtx-4090--llama-3.1-8b--q4_k_m--8k` | slots |" in out
    assert "h100-sxm" not in out
    assert main(["diff", str(old), str(old), "--work", str(tmp_path / "w2")]) == 0
    assert "No config moved" in capsys.readouterr().out


def test_compare_uses_tolerance(tmp_path):
    root = make_small_catalog(tmp_path)
    out = tmp_path / "s"
    run_sweep(root, out, jobs=1)
    rows = read_results(out)
    assert compare(rows, rows, 0.05) == []
    assert markdown([], 0.05).startswith("No config moved")
    # A config that stops fitting loses its page: the diff says where its address now lands.
    row = next(r for r in rows if r.fits)
    gone = [dataclasses.replace(r, fits=False) if r is row else r for r in rows]
    (move,) = compare(rows, gone, 0.05)
    anchor = f"gpu/{row.gpu}/{row.model}/#{row_anchor(row)}"
    assert ("address", row.permalink, anchor) in move.changes
    assert f"| {row.permalink} | {anchor} |" in markdown([move], 0.05)
