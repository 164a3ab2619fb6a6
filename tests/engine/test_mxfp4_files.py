"""MXFP4 weights as each runtime's files hold them: the experts at 4.25 bits, the rest
at BF16 in the HF checkpoint vLLM loads, at Q8_0 in llama.cpp's GGUF."""

from __future__ import annotations

import csv

import pytest
from backpressure.catalog.loader import load_catalog
from backpressure.engine.units import GIB
from backpressure.generator import resolve
from backpressure.generator.paths import ROOT

LLAMA_BENCH_NAMES = {"gpt-oss 20B": "gpt-oss-20b", "gpt-oss 120B": "gpt-oss-120b"}


def _weights_gib(model: str, runtime: str) -> float:
    cfg = resolve.configure(
        load_catalog(), "rtx-pro-6000-blackwell", "mxfp4", 8192, model, runtime=runtime
    )
    return cfg.capacity().weights_bytes / GIB


def _printed_sizes() -> dict[str, float]:
    """The file size llama-bench prints for each gpt-oss GGUF [GiB]."""
    path = ROOT / "benchmarks" / "data" / "decode_single_stream.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        rows = [
            r for r in csv.DictReader(fh) if r["model"] in LLAMA_BENCH_NAMES and r["model_size_gib"]
        ]
    sizes = {LLAMA_BENCH_NAMES[r["model"]]: float(r["model_size_gib"]) for r in rows}
    assert set(sizes) == set(LLAMA_BENCH_NAMES.values())
    return sizes


@pytest.mark.parametrize("model", sorted(LLAMA_BENCH_NAMES.values()))
def test_llama_cpp_costs_the_gguf_llama_bench_prints(model: str) -> None:
    assert _weights_gib(model, "llama.cpp") == pytest.approx(_printed_sizes()[model], rel=0.01)


def test_vllm_keeps_the_rest_in_bf16() -> None:
    # 13.47 GiB is what vLLM logs loading gpt-oss-20b (catalog/quants/mxfp4.yaml notes);
    # the engine adds the MXFP4 kernel's padding on top of the BF16 rest
    assert _weights_gib("gpt-oss-20b", "vllm") > _weights_gib("gpt-oss-20b", "llama.cpp") + 2.0
    assert _weights_gib("gpt-oss-20b", "vllm") == pytest.approx(13.47, rel=0.03)
