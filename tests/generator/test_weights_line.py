"""The arithmetic's weights line multiplies out to the weights it shows, whatever the format."""

from __future__ import annotations

import re

import pytest
from backpressure.catalog.loader import load_catalog
from backpressure.engine.units import GIB
from backpressure.generator import resolve
from backpressure.generator.text import weights_expression


@pytest.mark.parametrize(
    ("quant", "model", "runtime"),
    [
        ("q4_k_m", "llama-3.1-8b", "llama.cpp"),  # GGUF: every weight at the format's bits
        ("awq-int4", "llama-3.1-8b", "vllm"),  # embeddings and head stay 16-bit
        ("mxfp4", "gpt-oss-20b", "vllm"),  # only the routed experts are MXFP4
        ("mxfp4", "gpt-oss-20b", "llama.cpp"),  # the rest Q8_0 in the GGUF
    ],
)
def test_the_line_multiplies_out_to_its_value(quant: str, model: str, runtime: str) -> None:
    cfg = resolve.configure(load_catalog(), "rtx-5090", quant, 8192, model, runtime=runtime)
    cap = cfg.capacity()
    line = weights_expression(cap.total_params, cap.weights_bytes, cfg.fmt.bits_per_weight)
    m = re.match(r"([\d.]+)B × ([\d.]+) bits / 8", line)
    assert m is not None, line
    product = float(m[1]) * 1e9 * float(m[2]) / 8
    assert product / GIB == pytest.approx(cap.weights_bytes / GIB, rel=0.002), line
    if quant == "q4_k_m":
        assert line == f"{m[1]}B × {cfg.fmt.bits_per_weight:g} bits / 8"
    else:
        assert line.endswith(f"({cfg.fmt.bits_per_weight:g} bits where quantized)")
