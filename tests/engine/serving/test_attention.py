"""Attention compute by layer group: windowed layers meet at most `window` keys per query,
and layers without a KV cache (linear attention, Mamba) have no query-key pairs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from backpressure.catalog.loader import load_catalog
from backpressure.engine.serving.model import StepCost
from backpressure.engine.serving.spec import step_cost
from backpressure.engine.serving.step import pack, step_parts
from backpressure.generator import resolve


def _cost(model: str, quant: str = "bf16") -> StepCost:
    cfg = resolve.configure(load_catalog(), "h100-sxm", quant, 32768, model, runtime="vllm")
    cost = step_cost(cfg.device, cfg.runtime, cfg.fmt, cfg.constants, cfg.arch, cfg.capacity())
    assert cost is not None
    return cost


def _prefill_s(cost: StepCost, tokens: int) -> float:
    """A prefill-only step of one prompt chunk of ``tokens`` after ``tokens`` already computed."""
    pairs = tokens * tokens + tokens * (tokens + 1) / 2
    return step_parts(pack(cost), np.zeros(tokens + 1), 0, 0.0, tokens, tokens, pairs, 1, 1)[0]


def test_pairs_per_layer_group_follow_the_architecture() -> None:
    cat = load_catalog()
    for model in ("gpt-oss-20b", "gemma-3-12b", "qwen3-next-80b-a3b", "llama-3.1-8b"):
        a = cat.archs[model].attention
        cost = _cost(model, "mxfp4" if model.startswith("gpt-oss") else "bf16")
        per_layer = 4.0 * a.num_heads * a.head_dim
        assert cost.attn_flops_per_pair == per_layer * a.full_layers
        assert cost.window_attn_flops_per_pair == per_layer * a.windowed_layers
    # Qwen3-Next: 12 of its 48 layers attend; the other 36 are linear attention
    assert cat.archs["qwen3-next-80b-a3b"].attention.full_layers == 12


def test_a_long_chunk_costs_less_where_half_the_layers_are_windowed() -> None:
    windowed = _cost("gpt-oss-20b", "mxfp4")
    assert windowed.window == 128
    as_full = dataclasses.replace(
        windowed,
        attn_flops_per_pair=windowed.attn_flops_per_pair + windowed.window_attn_flops_per_pair,
        window_attn_flops_per_pair=0.0,
    )
    long_w, long_f = _prefill_s(windowed, 8192), _prefill_s(as_full, 8192)
    assert long_w < 0.9 * long_f
    # a chunk inside the first window meets no more keys than the window holds: no saving
    assert _prefill_s(windowed, 32) == pytest.approx(_prefill_s(as_full, 32), rel=1e-12)
