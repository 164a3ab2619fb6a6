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
from backpressure.generator.sweep.combos import enumerate_combos, released_quant
from backpressure.generator.sweep.evaluate import evaluate, evaluate_many
from backpressure.generator.sweep.rig import LoadSettings
from backpressure.generator.sweep.run import run_sweep

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
        # a swept quant, or the format the model is released in (gpt-oss: MXFP4)
        assert c.quant in cat.settings.sweep_quants or c.quant == released_quant(cat, c.model)
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


def _check_littles_law(out: Path, output_tokens: int) -> int:
    """Little's law on every closed-loop point: N users = requests/s x latency (within 15 %).

    Returns how many points were checked.
    """
    checked = 0
    curves = read_curves(out)
    for row in read_results(out):
        c = curves[row.config_id]
        if not row.fits:
            assert row.saturation_rps is None
            assert c.users == ()
            continue
        for users, ttft, tpot, rps in zip(
            c.users, c.table_ttft_ms, c.table_tpot_ms, c.table_requests_per_s, strict=True
        ):
            latency_s = (ttft + tpot * (output_tokens - 1)) / 1000
            assert rps * latency_s == pytest.approx(users, rel=0.15), (row.config_id, users)
            checked += 1
        assert row.saturation_rps == pytest.approx(max(c.table_requests_per_s), rel=1e-4)
    return checked


def test_closed_loops_agree_with_littles_law(small):
    root, out, _ = small
    assert _check_littles_law(out, load_catalog(root).settings.output_tokens) > 50


def test_breaking_rates_carry_the_serving_band_and_name_their_rule(small):
    _, out, _ = small
    seen = set()
    for row in read_results(out):
        if row.breaking_rps is None:
            assert row.breaking_rps_low is None
            assert row.breaking_rps_high is None
            continue
        assert row.breaking_rps_low < row.breaking_rps < row.breaking_rps_high
        ratio = row.breaking_rps_high / row.breaking_rps - 1
        assert ratio == pytest.approx(row.serving_band_pct / 100, abs=1e-4)
        assert row.breaking_rule in ("ttft", "p99", "error_budget", "soak")
        # no rule breaks below the breaking rate: it is the lowest of them
        for rate in (row.ttft_break_rps, row.p99_break_rps, row.shed_onset_rps, row.soak_break_rps):
            assert rate is None or rate >= row.breaking_rps
        seen.add(row.breaking_rule)
    assert len(seen) >= 2


def test_every_fitting_config_gets_a_rate_or_a_reason(small):
    _, out, _ = small
    for row in read_results(out):
        if not row.fits:
            assert row.usable is None
            assert row.verdict.startswith("does not fit")
        elif row.usable is False:
            assert row.breaking_rps is None
            assert "too slow to use" in row.verdict
        elif row.fails_at_any_load:
            assert row.breaking_rps is None
            assert row.verdict.startswith("fails at any load")
        else:
            assert row.breaking_rps is not None
            assert row.verdict.startswith("breaks at")


def test_vllm_configs_differing_only_in_context_are_served_alike(small):
    # vLLM admits by the blocks a request holds, so a 1,024 + 128 token request
    # runs the same whatever the context the config is swept at.
    _, out, _ = small
    rows = {r.config_id: r for r in read_results(out)}
    a, b = rows["h100-sxm--llama-3.1-8b--bf16--2k"], rows["h100-sxm--llama-3.1-8b--bf16--8k"]
    assert a.runtime == "vllm"
    assert a.breaking_rps == b.breaking_rps
    assert a.max_concurrency == b.max_concurrency > a.slots > b.slots
    # llama.cpp reserves the full context: a longer one holds fewer requests
    c, d = rows["h100-sxm--llama-3.1-8b--q4_k_m--2k"], rows["h100-sxm--llama-3.1-8b--q4_k_m--8k"]
    assert c.max_concurrency == c.slots > d.max_concurrency == d.slots


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


def _resweep_with_an_edit(small, tmp_path, monkeypatch, rel):
    """Re-sweep a copy of the small sweep with ``rel`` edited (a comment added)."""
    import shutil

    from backpressure.generator import keys

    root, out, _ = small
    work = tmp_path / "sweep"
    shutil.copytree(out, work)
    real = keys.read_bytes
    edited = keys.ROOT / rel
    assert edited.is_file()
    monkeypatch.setattr(
        keys, "read_bytes", lambda p: real(p) + (b"\n# edited\n" if p == edited else b"")
    )
    return run_sweep(root, work, jobs=1), out, work


def test_an_edit_to_the_verdict_text_recomputes_every_row(small, tmp_path, monkeypatch):
    # The verdict is written by generator/text.py; once a hand-kept list missed it
    # and a re-sweep reused every row, publishing the old wording.
    stats, out, work = _resweep_with_an_edit(small, tmp_path, monkeypatch, "generator/text.py")
    assert stats.computed == stats.total > 0
    assert stats.reused == 0
    # a comment changes no output, recomputed or not
    assert (work / "results.csv").read_bytes() == (out / "results.csv").read_bytes()


@pytest.mark.parametrize("rel", ["generator/site/chart_pack.py", "engine/sim/loop.py"])
def test_an_edit_to_page_or_scenario_code_recomputes_no_row(small, tmp_path, monkeypatch, rel):
    stats, _, _ = _resweep_with_an_edit(small, tmp_path, monkeypatch, rel)
    assert stats.computed == 0
    assert stats.reused == stats.total


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
        if row.breaking_rps is not None:
            assert row.breaking_rps in c.load_rps or any(
                abs(x / row.breaking_rps - 1) < 1e-4 for x in c.load_rps
            )
            assert c.timeline_rps == pytest.approx(row.breaking_rps, rel=1e-4)
            assert len(c.users) >= 1
            assert c.users[0] == 1
        elif not row.fits:
            assert c.load_rps == ()
            assert c.users == ()


def test_a_cpu_host_too_slow_to_use_gets_its_own_verdict():
    # 405B on a CPU host decodes well under a token a second: no rate is published
    # for it, and the verdict says why.
    cat = load_catalog()
    keys = InputKeys(cat)
    combos = {c.id: c for c in enumerate_combos(cat)}
    combo = combos["epyc-9654-768gb--llama-3.1-405b--q4_k_m--8k"]
    row, curves = evaluate(cat, combo, keys.fingerprint_key(combo))
    floor = LoadSettings.from_catalog(cat).min_usable_tokens_per_s
    assert row.fits
    assert row.usable is False
    assert row.single_stream_tokens_per_s < floor
    assert row.breaking_rps is None
    assert "too slow to use" in row.verdict
    assert curves.load_rps == ()
    assert curves.users == (1,)


def test_reused_rows_are_kept_as_the_lines_the_writer_wrote(small):
    import csv

    from backpressure.generator.results_io import csv_line
    from backpressure.generator.sweep.run import _row_lines

    _, out, _ = small
    text = (out / "results.csv").read_text(encoding="utf-8")
    kept = _row_lines(text)
    parsed = list(csv.reader(text.splitlines(keepends=True)))[1:]
    assert kept is not None
    assert len(kept) == len(parsed) > 0
    # the same lines a parse and a fresh write would give (the fallback's way)
    assert kept == {cells[0]: csv_line(cells) for cells in parsed}
    # a quoted cell holding a line break spans lines: then the file is parsed as CSV
    header, first = text.split("\n", 2)[:2]
    spanning = header + "\n" + first.replace(",true,", ',"a\nb",', 1) + "\n"
    assert _row_lines(spanning) is None


def test_a_no_change_resweep_writes_nothing(small):
    root, out, _ = small
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    stats = run_sweep(root, out, jobs=1)
    assert (stats.computed, stats.reused) == (0, stats.total)
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_models_are_swept_in_the_format_they_are_released_in(cat):
    combos = enumerate_combos(cat)
    released = {(c.model, c.quant) for c in combos if c.quant not in cat.settings.sweep_quants}
    # gpt-oss ships MXFP4 experts (config.json quantization_config.quant_method)
    assert {m for m, _ in released} == {"gpt-oss-20b", "gpt-oss-120b"}
    assert {q for _, q in released} == {"mxfp4"}
    # and only those models get it: MXFP4 is not a format the others are published in
    assert {c.model for c in combos if c.quant == "mxfp4"} == {"gpt-oss-20b", "gpt-oss-120b"}
