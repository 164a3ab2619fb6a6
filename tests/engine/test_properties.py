"""Invariants of the capacity engine, fuzzed with Hypothesis."""

from __future__ import annotations

import math
from dataclasses import asdict

from backpressure.engine.capacity import estimate
from backpressure.engine.inputs import Device, Runtime
from backpressure.generator import resolve
from hypothesis import given, settings
from hypothesis import strategies as st

MODELS = st.sampled_from(
    [
        "llama-3.1-8b",
        "gemma-2-9b",
        "mixtral-8x7b",
        "deepseek-v2-lite",
        "qwen3-30b-a3b",
        "gemma-3-27b",
        "phi-3-mini-4k",
    ]
)
QUANTS = st.sampled_from(["q4_k_m", "q8_0", "bf16"])


def run(cat, model, quant, memory_gib, bandwidth_gbs, context, kind="discrete"):
    device = Device(
        "fuzz",
        kind,
        "nvidia" if kind == "discrete" else "apple",
        round(memory_gib * 2**30),
        round(bandwidth_gbs * 1e9),
        100 * 10**12,
        usable_memory_fraction=None if kind == "discrete" else 0.75,
    )
    runtime = resolve.runtime_profile(cat.runtimes["llama.cpp"])
    arch = cat.archs[model]
    return estimate(
        device,
        runtime,
        resolve.weight_format(cat.quants[quant]),
        resolve.constants(cat),
        min(context, arch.max_context),
        2.0,
        arch=arch,
    )


def finite(result) -> bool:
    return all(math.isfinite(v) for v in asdict(result).values() if isinstance(v, float))


@settings(max_examples=60, deadline=None)
@given(
    MODELS,
    QUANTS,
    st.floats(1, 2048),
    st.floats(50, 8000),
    st.integers(1, 131072),
    st.sampled_from(["discrete", "unified"]),
)
def test_no_nan_or_inf(cat, model, quant, mem, bw, ctx, kind):
    assert finite(run(cat, model, quant, mem, bw, ctx, kind))


@settings(max_examples=60, deadline=None)
@given(MODELS, QUANTS, st.floats(1, 1024), st.floats(1, 1024), st.integers(512, 32768))
def test_slots_never_fall_as_memory_grows(cat, model, quant, a, b, ctx):
    small, big = sorted((a, b))
    assert (
        run(cat, model, quant, small, 1000, ctx).slots
        <= run(cat, model, quant, big, 1000, ctx).slots
    )


@settings(max_examples=60, deadline=None)
@given(MODELS, QUANTS, st.floats(8, 1024), st.integers(1, 65536), st.integers(1, 65536))
def test_slots_never_rise_with_context(cat, model, quant, mem, c1, c2):
    short, long_ = sorted((c1, c2))
    assert (
        run(cat, model, quant, mem, 1000, long_).slots
        <= run(cat, model, quant, mem, 1000, short).slots
    )


@settings(max_examples=40, deadline=None)
@given(MODELS, st.floats(8, 1024), st.integers(256, 32768))
def test_effective_concurrency_is_the_lower_ceiling(cat, model, mem, ctx):
    r = run(cat, model, "q4_k_m", mem, 1000, ctx)
    assert r.effective_concurrency <= r.slots
    if r.fits:
        assert r.effective_concurrency >= 1


def test_vllm_runtime_reserves_more_than_llama_cpp(cat):
    dev = resolve.device_for(cat, "h100-sxm")
    arch = cat.archs["llama-3.1-8b"]
    args = (resolve.weight_format(cat.quants["bf16"]), resolve.constants(cat), 8192, 2.0)
    vllm = estimate(dev, resolve.runtime_profile(cat.runtimes["vllm"]), *args, arch=arch)
    lcpp = estimate(dev, Runtime("l", "fixed-overhead", "layer-split", 2 * 2**30), *args, arch=arch)
    assert vllm.kv_budget_bytes < lcpp.kv_budget_bytes
