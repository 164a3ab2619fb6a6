"""The serving report's halves: disjoint, deterministic, and bands set from the fit half."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

import pytest
from backpressure.catalog.loader import Catalog, load_catalog
from backpressure.generator.accuracy.archs import arch_of
from backpressure.generator.accuracy.batched import holdout_curves, load_batched
from backpressure.generator.accuracy.page import all_points
from backpressure.generator.accuracy.report import Point, kind_of
from backpressure.generator.accuracy.serving import load_cases
from backpressure.generator.paths import ROOT


def _report_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "serving_report", ROOT / "benchmarks" / "serving_report.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["serving_report"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def pts(cat: Catalog) -> list[Point]:
    return all_points(cat)[0]


def _sides(cases: Sequence[object]) -> dict[str, set[bool]]:
    sides: dict[str, set[bool]] = {}
    for c in cases:
        sides.setdefault(c.curve, set()).add(c.holdout)  # type: ignore[attr-defined]
    return sides


def test_halves_split_by_curve_and_are_disjoint(cat: Catalog) -> None:
    cases = load_cases(cat)[0]
    rows = load_batched(cat)[0]
    for group in (cases, rows):
        sides = _sides(group)
        # every curve sits wholly on one side, so no curve is both fitted and held out
        assert all(len(s) == 1 for s in sides.values())
        fit = {c for c, s in sides.items() if s == {False}}
        held = {c for c, s in sides.items() if s == {True}}
        assert fit
        assert held
        assert not fit & held
        assert fit | held == set(sides)


def test_split_is_deterministic(cat: Catalog) -> None:
    first = [(c.row, c.holdout) for c in load_cases(cat)[0]]
    again = [(c.row, c.holdout) for c in load_cases(cat)[0]]
    assert first == again
    rows = [(c.row, c.holdout) for c in load_batched(cat)[0]]
    assert rows == [(c.row, c.holdout) for c in load_batched(cat)[0]]
    # the batched split depends on the curves' identities, not their order
    pairs = [("a", "x"), ("a", "y"), ("b", "z"), ("b", "w")]
    assert holdout_curves(pairs) == holdout_curves(list(reversed(pairs)))
    assert len(holdout_curves(pairs)) == 2


def test_every_model_of_the_batched_data_lands_on_both_sides(cat: Catalog) -> None:
    rows = load_batched(cat)[0]
    for model in {c.model for c in rows}:
        assert {c.holdout for c in rows if c.model == model} == {False, True}


def test_bands_are_set_from_the_fit_half_only(pts: list[Point]) -> None:
    report = _report_module()
    before = report.bands(pts)
    assert set(before) == set(report.KINDS)
    # ten-fold worse predictions on every held-out point: the fit band must not move
    worse = [
        dataclasses.replace(p, predicted=p.predicted * 10) if p.case.holdout else p for p in pts
    ]
    after = report.bands(worse)
    for kind in before:
        assert after[kind][0] == before[kind][0]
        assert after[kind][1] <= before[kind][1]
    held = [p for p in pts if p.case.holdout and kind_of(p) is not None]
    assert held


def test_catalog_bands_follow_the_rule(cat: Catalog) -> None:
    report = _report_module()
    assert report.report(cat)[1], "run benchmarks/serving_report.py and update calibration.yaml"


def test_tensor_parallel_across_pods_is_left_out_and_its_one_gpu_rows_kept(cat: Catalog) -> None:
    cases, skipped = load_cases(cat)
    pods = "https://github.com/dennislee22/vLLM-benchmarking/"
    assert skipped["tensor parallel across separate pods (link not known)"] > 0
    from_pods = [c for c in cases if c.source.startswith(pods)]
    assert from_pods, "the same source's one-GPU rows are still compared"
    assert all(c.gpus == 1 for c in from_pods)


def test_a_run_launched_expert_parallel_is_replayed_so(cat: Catalog) -> None:
    cases, _ = load_cases(cat)
    moe = [c for c in cases if c.gpus > 1 and arch_of(cat, c.model).is_moe]
    dealt = [c for c in moe if c.expert_parallel]
    split = [c for c in moe if not c.expert_parallel]
    assert dealt, "some runs pass --enable-expert-parallel or --ep-size"
    assert split, "and most keep the runtime's tensor-parallel default"
    # the same page's Qwen3-235B FP8 runs on 8 A100, with and without the flag
    page = "qwen3-235b-a22b/a100.md"
    assert {c.expert_parallel for c in moe if page in c.source and c.quant == "fp8"} == {
        True,
        False,
    }


def test_a_model_outside_the_catalog_is_compared_through_its_calibration_keys(
    cat: Catalog,
) -> None:
    cases, _ = load_cases(cat)
    minimax = [c for c in cases if c.model == "MiniMax-M2.5" and c.framework == "vllm"]
    assert minimax, "the MiniMax-M2.5 runs map to calibration_archs.yaml, not the catalog"
    assert "MiniMax-M2.5" not in cat.models
    assert all(c.expert_parallel for c in minimax), "their notes say expert parallel on"
    # one sweep printed as one file per concurrency level is one curve, so it weighs
    # as much as any other source's sweep and falls in one half
    sweep = [c for c in minimax if "/test_05/i1024-o512/" in c.source]
    assert len({c.source for c in sweep}) == len(sweep) > 1
    assert len({c.curve for c in sweep}) == 1
