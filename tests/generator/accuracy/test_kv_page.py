"""The accuracy page's KV section: which logs are held out, and the misses ranked."""

from __future__ import annotations

import statistics
from pathlib import Path
from unittest import mock

import pytest
from backpressure.catalog.loader import load_catalog
from backpressure.engine.kv_pool import vllm_pool
from backpressure.generator.accuracy.archs import extra_archs
from backpressure.generator.accuracy.kv import (
    FIT_FILE,
    FIT_GPU,
    FIT_RELEASE,
    OFF_CATALOG,
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
        r.family in ("full", "sliding", "hybrid-linear", "hybrid-mamba") for r in rows
    )
    errors = sorted((abs(r.error) for r in rows if r.error is not None), reverse=True)
    shown = [float(w["error"].strip(" %+-")) for w in ctx["worst"]]
    assert len(shown) == min(KV_LISTED, len(errors))
    assert shown == [round(100 * e, 1) for e in errors[: len(shown)]]


def test_the_allocator_reproduces_vllm_given_the_logged_memory() -> None:
    # The allocator check isolates the block layout from the memory budget: with the
    # log's own KV memory, the token count must agree for every attention family.
    rows = [r for r in vllm_checks(load_catalog()) if r.alloc is not None]
    for family in ("full", "sliding", "hybrid-linear", "hybrid-mamba"):
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
    # a table only renders after a blank line: the paragraph before it must end
    assert "\n\n| attention layers |" in section
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
    extra = {repo.rpartition("/")[2] for repo in extra_archs()}
    assert all(r.model in cat.models or r.model in extra for r in rows)
    # Without the GPU in the catalog there is no device to predict from.
    assert all(r.e2e is None for r in rows if r.gpu.startswith("A100"))
    # GPUs known only by their memory (OFF_CATALOG) are predicted from that alone
    listed = [r for r in rows if r.gpu not in OFF_CATALOG]
    assert any(r.e2e is not None for r in listed) == any(g.startswith("h100") for g in GPUS)
    kv_context(cat)  # the page renders from what is there


def test_calibration_only_models_are_checked_end_to_end_only_with_weights() -> None:
    # The Mamba-2 hybrid logs load Granite 4.0-H and Nemotron-H models the site does
    # not publish. The Granite 1B one loads an unquantized checkpoint on a catalog GPU,
    # so its budget is predicted too, as are the Cascade-2 NVFP4 ones (their recipe is
    # priced as stored; an H100 94GB known by its memory, and an RTX 5090); the 350M
    # one ran on a box whose GPU memory was set by hand, and the Nano 4B one loads an
    # FP8 layout no quant describes.
    cat = load_catalog()
    ctx = kv_context(cat)
    rows = {f["family"]: f for f in ctx["families"]}
    assert rows["hybrid-mamba"]["n"] == 11
    assert rows["hybrid-mamba"]["inside"] == "9 of 9"
    assert ctx["extra"] == [
        "NVIDIA-Nemotron-3-Nano-4B-FP8",
        "Nemotron-Cascade-2-30B-A3B-NVFP4",
        "granite-4.0-h-1b",
        "granite-4.0-h-350m",
    ]
    by_model = {r.model: r for r in vllm_checks(cat) if r.family == "hybrid-mamba"}
    assert by_model["granite-4.0-h-350m"].e2e is None
    nemotron = by_model["NVIDIA-Nemotron-3-Nano-4B-FP8"]
    assert nemotron.e2e is None
    # the allocator lands on the log's tokens and concurrency exactly
    assert nemotron.alloc == nemotron.logged == 208_320
    assert nemotron.alloc_conc == pytest.approx(98.20, abs=0.005)
    one_b = by_model["granite-4.0-h-1b"]
    assert one_b.e2e is not None
    # the keys give the checkpoint's weights: the log prints 2.72 GiB
    assert one_b.weights_gib == pytest.approx(2.72, rel=0.01)
    assert rows["hybrid-linear"]["n"] > 0


def test_a_checkpoint_that_quantizes_only_its_experts_is_priced_as_stored() -> None:
    # Both Qwen3-Next AWQ checkpoints keep every layer but the routed experts in
    # 16 bits. The one with a known group size (32: 4.5 bits) is priced that way
    # end to end, and its weights land on the log's loading line (22.53 GiB per GPU
    # at TP 2); the catalog's awq-int4, which quantizes every Linear layer, would
    # give 19.72. The other, whose group size no source gives, is checked by the
    # allocator alone.
    rows = [r for r in vllm_checks(load_catalog()) if r.model == "qwen3-next-80b-a3b"]
    stored = [r for r in rows if "aether-agent" in r.url]
    assert len(stored) == 1
    assert stored[0].weights_gib == pytest.approx(22.53, rel=0.01)
    assert stored[0].logged_weights_gib == pytest.approx(22.53, rel=0.001)
    unknown = [r for r in rows if "amd-r9700" in r.url]
    assert unknown
    assert all(r.e2e is None and r.alloc is not None for r in unknown)


def test_a_published_family_without_logs_is_listed_as_unchecked() -> None:
    # A family the catalog publishes with no held-out log at all is named, not left out
    cat = load_catalog()
    only_full = [r for r in vllm_checks(cat) if r.family == "full"]
    with mock.patch("backpressure.generator.accuracy.page.vllm_checks", return_value=only_full):
        rows = {f["family"]: f for f in kv_context(cat)["families"]}
    assert rows["hybrid-mamba"] == {
        "family": "hybrid-mamba",
        "n": 0,
        "alloc": "-",
        "median": "no log found",
        "worst": "-",
        "inside": "-",
    }


# Two vLLM logs of Granite 4.0-H. ROCm issue 5724 (vLLM 0.15.0rc3): "Setting attention
# block size to 400 tokens", "Padding mamba page size by 1.39%", "Available KV cache
# memory: 107.5 GiB", "GPU KV cache size: 3,522,400 tokens", "Maximum concurrency for
# 32,768 tokens per request: 791.58x". am-dev-75/retriva-docs (vLLM 0.19.0, RTX 3060):
# block 400, "Padding mamba page size by 1.59%", "Available KV cache memory: 4.09 GiB",
# "GPU KV cache size: 53,200 tokens", "... 4,096 tokens per request: 66.95x"; the log
# rounds the memory, and 4.0875 GiB (the low end of that rounding) gives its blocks.
# The keys are those of benchmarks/data/calibration_archs.yaml; the Mamba-2 state is conv
# (3 x (d_inner + 2 x 128)) + SSM (48 heads x head dim x 128), 2 bytes each.
@pytest.mark.parametrize(
    ("repo", "max_len", "batched", "d_inner", "head_dim", "padding", "gib", "tokens", "conc"),
    [
        ("ibm-granite/granite-4.0-h-350m", 32768, 8192, 1536, 32, 1.39, 107.5, 3_522_400, 791.58),
        ("ibm-granite/granite-4.0-h-1b", 4096, 2048, 3072, 64, 1.59, 4.0875, 53_200, 66.95),
    ],
)
def test_granite_h_pool_reproduces_its_log(
    repo, max_len, batched, d_inner, head_dim, padding, gib, tokens, conc
):
    pool = vllm_pool(extra_archs()[repo], 2.0, max_len, batched, gpus=1)
    assert pool.block == 400
    state = (3 * (d_inner + 2 * 128) + 48 * head_dim * 128) * 2
    assert round(100 * (pool.page_bytes - state) / state, 2) == padding
    avail = int(gib * 2**30)
    assert pool.reported_tokens(avail) == tokens
    assert pool.max_concurrency(avail) == pytest.approx(conc, abs=0.01)
