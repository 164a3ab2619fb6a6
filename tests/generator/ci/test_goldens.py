"""The frozen goldens: a quiet recalibration cannot change a verdict unnoticed."""

from __future__ import annotations

from backpressure.generator.ci import goldens


def test_golden_table_covers_the_catalog_span(cat):
    ids = goldens.case_ids()
    assert 45 <= len(ids) <= 60
    devices = {i.split("--")[0] for i in ids}
    kinds = {cat.gpus[d].memory_kind for d in devices if d in cat.gpus}
    assert kinds == {"discrete", "unified", "system"}
    assert any(d in cat.rigs for d in devices)
    models = {i.split("--")[1] for i in ids}
    assert any(cat.archs[m].is_moe for m in models)
    assert any(cat.archs[m].attention.mla_latent_dim for m in models)


def test_goldens_match_a_recomputation(cat):
    diffs = goldens.check(cat, names=goldens.TABLES)  # the simulation's: test_goldens_sim.py
    assert not diffs, "\n".join(d.diff for d in diffs)


def test_goldens_command_reports_a_difference(tmp_path, capsys, cat):
    root = tmp_path / "goldens"
    root.mkdir()
    (root / goldens.CASES).write_text("rtx-4090--llama-3.1-8b--q4_k_m--8k\n")
    goldens.update(cat, root, names=goldens.TABLES)
    path = root / "configs.csv"
    path.write_text(path.read_text().replace(",17,", ",18,", 1))
    diffs = goldens.check(cat, root, names=goldens.TABLES)
    assert [d.name for d in diffs] == ["configs.csv"]
    assert "-rtx-4090--llama-3.1-8b--q4_k_m--8k" in diffs[0].diff
