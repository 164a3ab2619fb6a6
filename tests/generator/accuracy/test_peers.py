"""The accuracy page's same-run table: vLLM runs a page repeated with other servers."""

from __future__ import annotations

import statistics

from backpressure.catalog.loader import load_catalog
from backpressure.generator.accuracy.page import all_points, peers_context


def test_each_row_pairs_a_vllm_run_with_another_server_on_the_same_setup() -> None:
    pts, _, _ = all_points(load_catalog())
    ctx = peers_context(pts)
    rows = ctx["rows"]
    assert rows
    assert all(r["sglang"] != "-" or r["trtllm"] != "-" for r in rows)
    ratios = [float(r["ratio"].rstrip("×")) for r in rows]
    assert ratios == sorted(ratios, reverse=True)
    assert ctx["median_ratio"] == f"{statistics.median(ratios):.1f}×"


def test_old_vllm_and_throughput_points_are_not_paired() -> None:
    pts, _, _ = all_points(load_catalog())
    ttft_v1 = [p for p in pts if p.metric == "ttft_ms" and getattr(p.case, "v1", False)]
    # Every row is one vLLM V1 TTFT point: never more rows than there are such points.
    assert len(peers_context(pts)["rows"]) <= len(ttft_v1)
    assert peers_context([p for p in pts if p.metric != "ttft_ms"])["rows"] == []
