"""SPEC §2's worked example, computed by hand and by the engine."""

from __future__ import annotations

import math

from backpressure.engine.capacity import estimate
from backpressure.engine.inputs import Constants, Device, Runtime, WeightFormat
from backpressure.engine.units import GIB, MIB

CONSTANTS = Constants(
    kv_heuristic_mib_per_billion=0.017,
    bandwidth_efficiency={"nvidia": 0.75},
    layer_overhead_s={"nvidia": 0.0},
    moe_expert_overhead_s=0.0,
    allreduce_latency_s={},
    prefill_compute_efficiency=0.5,
    decode_compute_efficiency=0.5,
    min_stream_tokens_per_s=10,
)


def worked_example() -> object:
    device = Device("24 GB card", "discrete", "nvidia", 24 * GIB, None)
    runtime = Runtime(
        "llama.cpp", "fixed-overhead", "layer-split", framework_overhead_bytes=2 * GIB
    )
    return estimate(
        device, runtime, WeightFormat("q4_k_m", 4.89), CONSTANTS, 8192, 2.0, params=7_000_000_000
    )


def test_hand_arithmetic_gives_18_slots():
    # Independent of the engine: the spec's four lines with the spec's constants.
    weights = 7e9 * 4.89 / 8
    budget = 24 * GIB - weights - 2 * GIB
    per_request = 0.017 * MIB * 7 * 8192
    assert math.floor(budget / per_request) == 18


def test_engine_reproduces_the_worked_example():
    r = worked_example()
    assert r.slots == 18
    assert r.weights_bytes == 4_278_750_000  # 7e9 x 4.89 / 8, exactly
    assert r.kv_budget_bytes == 24 * GIB - 4_278_750_000 - 2 * GIB
    assert r.kv_basis == "heuristic"
    # 0.95 GiB per request, as the spec's example shows
    assert round(r.kv_bytes_per_request / GIB, 2) == 0.95
    assert r.fits
