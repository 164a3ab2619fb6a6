"""The accuracy page's KV section: which logs are held out, and the misses ranked."""

from __future__ import annotations

import statistics
from pathlib import Path

from backpressure.catalog.loader import load_catalog
from backpressure.generator.accuracy.kv import (
    FIT_FILE,
    FIT_GPU,
    FIT_RELEASE,
    llama_cpp_checks,
    vllm_checks,
)
from backpressure.generator.accuracy.page import KV_LISTED, kv_context
from backpressure.generator.site.render import make_env


def test_only_the_fitting_release_counts_as_fitted() -> None:
    rows = vllm_checks(load_catalog())
    fitted = [r for r in rows if not r.held_out]
    assert fitted
    assert all((r.source, r.version, r.gpu) == (FIT_FILE, FIT_RELEASE, FIT_GPU) for r in fitted)
    # Rows of the fitting file from other releases or GPUs are checks, not fit.
    assert any(r.source == FIT_FILE and r.held_out for r in rows)


def test_family_counts_and_misses_come_from_the_held_out_rows() -> None:
    cat = load_catalog()
    rows = [r for r in vllm_checks(cat) if r.held_out]
    ctx = kv_context(cat)
    assert ctx["held"] == len(rows)
    assert sum(f["n"] for f in ctx["families"]) == sum(
        r.family in ("full", "sliding", "hybrid-linear") for r in rows
    )
    errors = sorted((abs(r.error) for r in rows if r.error is not None), reverse=True)
    shown = [float(w["error"].strip(" %+-")) for w in ctx["worst"]]
    assert len(shown) == min(KV_LISTED, len(errors))
    assert shown == [round(100 * e, 1) for e in errors[: len(shown)]]


def test_the_allocator_reproduces_vllm_given_the_logged_memory() -> None:
    # The allocator check isolates the block layout from the memory budget: with the
    # log's own KV memory, the token count must agree for every attention family.
    rows = [r for r in vllm_checks(load_catalog()) if r.alloc is not None]
    for family in ("full", "sliding", "hybrid-linear"):
        errs = [abs(r.alloc / r.logged - 1) for r in rows if r.family == family and r.alloc]
        assert errs, family
        assert statistics.median(errs) < 0.005, family


def test_llama_cpp_cache_lines_follow_the_cell_rule() -> None:
    rows = llama_cpp_checks(load_catalog())
    assert rows
    assert max(abs(r.error) for r in rows) < 0.01


def test_the_page_section_shows_every_family_row() -> None:
    cat = load_catalog()
    ctx = {"serving": _empty_serving(), "decode": {"kinds": [], "misses": []}}
    ctx["kv"] = kv_context(cat)
    md = make_env().get_template("pages/accuracy.md.j2").render(**ctx)
    section = md[md.index("## KV-cache capacity") :]
    for f in ctx["kv"]["families"]:
        assert f"| {f['family'].replace('-', '&#45;')} | {f['n']} |" in section
    misses = section[section.index("| run | logged tokens") :].split("\n\n")[0]
    assert len(misses.splitlines()) == 2 + len(ctx["kv"]["worst"]) > 2


def _empty_serving() -> dict[str, object]:
    return {
        "cases": 0,
        "points": 0,
        "curves": 0,
        "skipped": [],
        "ttft_left_out": 0,
        "headline": {},
        "rows": [],
        "worst": [],
        "peers": {"rows": [], "median_ratio": "-"},
    }


def test_a_small_catalog_checks_only_what_it_describes(tmp_path: Path) -> None:
    from tests.generator.small_catalog import GPUS, make_small_catalog

    cat = load_catalog(make_small_catalog(tmp_path))
    rows = vllm_checks(cat)
    assert rows  # Llama 3.1 8B logs are in the data
    assert all(r.model in cat.models for r in rows)
    # Without the GPU in the catalog there is no device to predict from.
    assert all(r.e2e is None for r in rows if r.gpu.startswith("A100"))
    assert any(r.e2e is not None for r in rows) == any(g.startswith("h100") for g in GPUS)
    kv_context(cat)  # the page renders from what is there


def test_a_published_family_without_logs_is_listed_as_unchecked() -> None:
    # Granite 4.0-H (Mamba-2 hybrid) is in the catalog, but no vLLM log with its KV
    # lines was found: the page says so rather than leaving the family out
    cat = load_catalog()
    assert any(a.recurrent is not None and a.recurrent.kind == "mamba" for a in cat.archs.values())
    rows = {f["family"]: f for f in kv_context(cat)["families"]}
    assert rows["hybrid-mamba"]["n"] == 0
    assert rows["hybrid-mamba"]["median"] == "no log found"
    assert rows["hybrid-linear"]["n"] > 0
