"""`verify` catches a tampered number; `diff` reports what moved between catalogs."""

from __future__ import annotations

import json
import shutil

import pytest
from backpressure.catalog.loader import load_catalog
from backpressure.generator.ci.diff import compare, markdown
from backpressure.generator.ci.verify import config_id_of
from backpressure.generator.cli.main import main
from backpressure.generator.keys import InputKeys
from backpressure.generator.results_io import read_results, row_json
from backpressure.generator.sweep.combos import enumerate_combos
from backpressure.generator.sweep.evaluate import evaluate
from backpressure.generator.sweep.run import run_sweep

from tests.generator.small_catalog import make_small_catalog

CID = "rtx-4090--llama-3.1-8b--q4_k_m--8k"


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A site directory holding one published config JSON, computed from the bundled catalog."""
    cat = load_catalog()
    combo = next(c for c in enumerate_combos(cat) if c.id == CID)
    row, _ = evaluate(cat, combo, InputKeys(cat).fingerprint_key(combo))
    site = tmp_path_factory.mktemp("site")
    api = site / "api" / "configs"
    api.mkdir(parents=True)
    (api / f"{CID}.json").write_text(json.dumps(row_json(row), sort_keys=True))
    return site


@pytest.mark.parametrize(
    "target",
    [
        CID,
        "/gpu/rtx-4090/llama-3.1-8b/q4_k_m/8k/",
        "https://example.org/x/gpu/rtx-4090/llama-3.1-8b/q4_k_m/8k/",
        "gpu/rtx-4090/llama-3.1-8b/q4_k_m/8k/index.html",
    ],
)
def test_targets_name_their_config(target):
    assert config_id_of(target) == CID


def test_verify_matches_a_published_json(published, capsys):
    code = main(["verify", str(published / "api" / "configs" / f"{CID}.json")])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith(f"verified: {CID}")


def test_a_site_without_an_index_is_exit_2(published, capsys):
    assert main(["verify", CID, "--site", str(published)]) == 2
    assert "not a published site" in capsys.readouterr().err


def test_verify_catches_tampering(published, tmp_path, capsys):
    data = json.loads((published / "api" / "configs" / f"{CID}.json").read_text())
    data["slots"] += 1
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(data))
    code = main(["verify", str(tampered)])
    out = capsys.readouterr().out
    assert code == 1
    assert "MISMATCH" in out
    rows = {line.split()[0] for line in out.splitlines()[2:]}
    assert rows == {"slots", "fingerprint"} or rows == {"slots"}


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
