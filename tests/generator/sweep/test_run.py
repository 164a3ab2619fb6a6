"""The batch sweep: enumeration, caching, determinism, and Little's law."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from backpressure.catalog.loader import load_catalog
from backpressure.generator.keys import InputKeys
from backpressure.generator.records import SEP
from backpressure.generator.results_io import (
    curves_jsonl,
    curves_line,
    read_curves,
    read_results,
    results_csv,
)
from backpressure.generator.sweep.combos import enumerate_combos
from backpressure.generator.sweep.evaluate import evaluate, evaluate_many
from backpressure.generator.sweep.rig import LoadSettings
from backpressure.generator.sweep.run import default_jobs, run_sweep

from tests.generator.small_catalog import make_small_catalog


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = make_small_catalog(tmp_path_factory.mktemp("cat"))
    out = tmp_path_factory.mktemp("sweep")
    stats = run_sweep(root, out, jobs=1)
    return root, out, stats


def test_enumeration_is_sorted_unique_and_valid(cat):
    combos = enumerate_combos(cat)
    ids = [c.id for c in combos]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    for c in combos:
        assert c.context <= cat.archs[c.model].max_context
        assert c.quant in cat.settings.sweep_quants
        assert len(c.id.split(SEP)) == 4
    # vLLM-only formats never land on Apple silicon or CPU hosts
    assert not [c for c in combos if c.device.startswith("m4-") and c.quant == "fp8"]


def test_rows_cover_every_combo(small):
    root, out, stats = small
    rows = read_results(out)
    assert [r.config_id for r in rows] == [c.id for c in enumerate_combos(load_catalog(root))]
    assert stats.computed == stats.total
    assert stats.fitting == sum(r.fits for r in rows)
    assert 0 < stats.fitting < stats.total


def _check_littles_law(out: Path) -> int:
    """Assert Little's law (within 5 %) for every fitting row; return how many were checked."""
    checked = 0
    for row in read_results(out):
        if not row.fits:
            assert row.saturation_rps is None
            continue
        expected = row.effective_concurrency / row.mean_service_s
        assert row.saturation_rps == pytest.approx(expected, rel=0.05), row.config_id
        checked += 1
    return checked


def test_saturation_agrees_with_littles_law(small):
    _, out, _ = small
    assert _check_littles_law(out) > 5


def test_breaking_points_carry_their_band(small):
    _, out, _ = small
    for row in read_results(out):
        if row.saturation_rps is None:
            continue
        assert row.saturation_rps_low < row.saturation_rps < row.saturation_rps_high
        ratio = row.saturation_rps_high / row.saturation_rps - 1
        assert ratio == pytest.approx(row.error_band_pct / 100, abs=1e-4)


def test_resweep_reuses_everything_and_is_byte_identical(small, tmp_path):
    root, out, _ = small
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    stats = run_sweep(root, out, jobs=1)
    assert stats.computed == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_one_gpu_change_recomputes_only_that_gpu(small, tmp_path):
    root, out, _ = small
    import shutil

    work = tmp_path / "sweep"
    shutil.copytree(out, work)
    path = root.parent / "edited"
    shutil.copytree(root, path)
    gpu = path / "gpus" / "m4-max-128gb.yaml"
    gpu.write_text(
        gpu.read_text().replace("usable_memory_fraction: 0.75", "usable_memory_fraction: 0.7")
    )
    stats = run_sweep(path, work, jobs=1)
    m4 = [r for r in read_results(work) if r.config_id.startswith("m4-max-128gb--")]
    assert stats.computed == len(m4) > 0


def test_parallel_equals_serial(small, tmp_path, monkeypatch):
    root, out, _ = small
    monkeypatch.setattr("backpressure.generator.sweep.run.PARALLEL_MIN", 1)
    monkeypatch.setattr("backpressure.generator.sweep.run.BATCH", 16)  # several tasks per worker
    par = tmp_path / "par"
    run_sweep(root, par, jobs=2)
    for name in ("results.csv", "curves.jsonl", "inputs.json"):
        assert (par / name).read_bytes() == (out / name).read_bytes()


def test_files_are_the_canonical_tables(small):
    # The sweep writes lines it built per config (and reuses old ones); they must be
    # exactly what results_io writes for the whole table.
    _, out, _ = small
    assert results_csv(read_results(out)) == (out / "results.csv").read_text(encoding="utf-8")
    curves = read_curves(out)
    assert curves_jsonl(curves.values()) == (out / "curves.jsonl").read_text(encoding="utf-8")
    # the shallow-dict line is the JSON of dataclasses.asdict, which it stands in for
    assert all(
        curves_line(c)
        == json.dumps(dataclasses.asdict(c), sort_keys=True, separators=(",", ":")) + "\n"
        for c in curves.values()
    )


def test_a_batch_gives_the_rows_of_one_config_at_a_time(small):
    root, _, _ = small
    cat = load_catalog(root)
    keys = InputKeys(cat)
    todo = [(c, keys.fingerprint_key(c)) for c in enumerate_combos(cat)[::3]]
    assert sum(1 for c, _ in todo if evaluate(cat, c, keys.fingerprint_key(c))[0].fits) > 3
    assert evaluate_many(cat, todo) == [evaluate(cat, c, key) for c, key in todo]


def test_curves_match_rows(small):
    _, out, _ = small
    curves = read_curves(out)
    for row in read_results(out):
        c = curves[row.config_id]
        if row.fits:
            assert len(c.load_rps) == 10
            assert max(c.goodput_rps) == pytest.approx(row.saturation_rps, rel=1e-4)
        else:
            assert c.load_rps == ()


@pytest.mark.slow
def test_the_whole_catalog_agrees_with_littles_law(tmp_path):
    # The cross-check over every config that fits: the simulated saturation
    # (completions per busy slot at the top of the load grid, times the slots)
    # against Little's law, effective_concurrency / mean_service_s. Slow servers
    # (minutes per request on a CPU) run for at least sim_min_service_times
    # service times so that the top level sees them busy at all.
    stats = run_sweep(None, tmp_path, jobs=default_jobs())
    assert _check_littles_law(tmp_path) == stats.fitting > 20_000


def test_a_slow_server_runs_longer_and_is_seen_busy():
    # 405B on a CPU host: one slot, minutes per request. In a default 180 s run
    # the top load level may see no arrival at all; its run spans four service
    # times instead, in whole 180 s steps, and its saturation meets Little's law.
    cat = load_catalog()
    settings = LoadSettings.from_catalog(cat)
    keys = InputKeys(cat)
    combos = {c.id: c for c in enumerate_combos(cat)}
    todo = [
        (combos[cid], keys.fingerprint_key(combos[cid]))
        for cid in (
            "rtx-4090--llama-3.1-8b--q4_k_m--8k",
            "epyc-9654-768gb--llama-3.1-405b--q4_k_m--8k",
            "rtx-4090--qwen2.5-7b--q8_0--4k",
        )
    ]
    together = evaluate_many(cat, todo)
    assert together == [evaluate(cat, c, key) for c, key in todo]  # order kept across lengths
    (fast, _), (slow, curves), _ = together
    seconds = run_seconds(slow.mean_service_s, settings)
    assert slow.mean_service_s > 300
    assert seconds % settings.sim_seconds == 0
    assert 4 * slow.mean_service_s <= seconds < 4 * slow.mean_service_s + settings.sim_seconds
    assert run_seconds(fast.mean_service_s, settings) == settings.sim_seconds
    assert curves.timeline_s[-1] >= seconds - 10
    for row in (fast, slow):
        little = row.effective_concurrency / row.mean_service_s
        assert row.saturation_rps == pytest.approx(little, rel=0.05)
