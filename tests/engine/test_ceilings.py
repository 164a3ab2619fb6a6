"""Decode ceiling, MoE expert reads, and which ceiling binds."""

from __future__ import annotations

import pytest
from backpressure.engine.arch import Experts
from backpressure.engine.ceilings import (
    StepModel,
    bandwidth_concurrency,
    binding_ceiling,
    distinct_experts,
    slow_batches,
)
from backpressure.generator import resolve
from backpressure.generator.resolve import capacity_for


def test_distinct_experts_limits():
    e = Experts(num_experts=8, experts_per_token=2, expert_params=1, moe_layers=1)
    assert distinct_experts(e, 0) == 0
    assert distinct_experts(e, 1) == pytest.approx(2)
    assert distinct_experts(e, 2) == pytest.approx(8 * (1 - 0.75**2))
    assert distinct_experts(e, 1000) == pytest.approx(8)


def test_mixtral_memory_follows_total_and_speed_follows_active(cat):
    arch = cat.archs["mixtral-8x7b"]
    r = capacity_for(gpu="h100-sxm", model="mixtral-8x7b", quant="q4_k_m", context=4096, cat=cat)
    # memory: all 46.7B parameters at 4.89 bits
    assert r.weights_bytes == pytest.approx(46.7e9 * 4.89 / 8, rel=0.002)
    # speed: one stream streams only the 12.9B active parameters (less the embedding
    # rows it looks up), so the bandwidth term of a step is the active share
    active_bytes = (arch.active_params - arch.lookup_only_params) * 4.89 / 8
    c = resolve.constants(cat)
    bandwidth = c.bandwidth_efficiency["nvidia"] * cat.gpus["h100-sxm"].bandwidth_bytes_per_s
    overhead = 32 * c.layer_overhead_s["nvidia"] + 32 * c.moe_layer_overhead_s.get("nvidia", 0)
    overhead += 32 * 2 * c.moe_expert_overhead_s
    expected_step = active_bytes / bandwidth + overhead
    kv = 2048 * r.kv_bytes_per_token / bandwidth
    assert 1 / r.decode_tokens_per_s == pytest.approx(expected_step + kv, rel=0.01)
    dense = capacity_for(gpu="h100-sxm", params_b=46.7, quant="q4_k_m", context=4096, cat=cat)
    assert r.decode_tokens_per_s > 1.4 * dense.decode_tokens_per_s


def step(overhead: float = 0.001, compute: float = 0.0) -> StepModel:
    return StepModel(
        dense_bytes=4_000_000_000,
        expert_bytes=0.0,
        experts=None,
        kv_bytes_per_token=131072,
        bandwidth_bytes_per_s=1e12,
        overhead_s=overhead,
        compute_per_seq_s=compute,
    )


def test_bandwidth_concurrency_is_the_edge():
    s = step()
    b = bandwidth_concurrency(s, 4096, 10)
    assert s.step_time_s(b, b * 4096) <= 0.1 < s.step_time_s(b + 1, (b + 1) * 4096)


def test_crawl_gives_zero_streams():
    assert bandwidth_concurrency(step(overhead=0.2), 4096, 10) == 0


def test_binding_ceiling_names():
    s = step()
    b = bandwidth_concurrency(s, 4096, 10)
    assert binding_ceiling(b, b, s, 4096) == "kv"
    assert binding_ceiling(b + 5, b, s, 4096) == "bandwidth"
    hot = step(compute=0.01)
    bc = bandwidth_concurrency(hot, 4096, 10)
    assert binding_ceiling(bc + 5, bc, hot, 4096) == "compute"


def test_slots_to_spare_can_still_crawl(cat):
    # 192 GB of unified memory holds a 70B model many times over, but 800 GB/s
    # streams its 43 GB of weights only about fifteen times a second, and the GPU's
    # FLOPS cap the batch soon after.
    r = capacity_for(
        gpu="m2-ultra-192gb", model="llama-3.3-70b", quant="q4_k_m", context=2048, cat=cat
    )
    assert r.slots > 10
    assert r.binding_ceiling in {"bandwidth", "compute"}
    assert r.effective_concurrency < r.slots
    assert r.decode_tokens_per_s < 20


def test_big_context_on_small_card_is_kv_bound(cat):
    r = capacity_for(gpu="rtx-4090", model="llama-3.1-8b", quant="q4_k_m", context=32768, cat=cat)
    assert r.binding_ceiling == "kv"
    assert r.effective_concurrency == r.slots


def metal_step(columns: tuple[int, ...], ext_from: int, pair_below: int = 0) -> StepModel:
    from backpressure.engine.kernels import MetalKernels

    # 40 MB of dense weights, 2 MB per routed expert, 8 of 64 experts per token in 2
    # layers, at 1 GB/s: one stream reads 40 + 2 x 8 x 2 = 72 MB (72 ms)
    return StepModel(
        dense_bytes=40e6,
        expert_bytes=2e6,
        experts=Experts(num_experts=64, experts_per_token=8, expert_params=1, moe_layers=2),
        kv_bytes_per_token=0.0,
        bandwidth_bytes_per_s=1e9,
        overhead_s=0.0,
        compute_per_seq_s=0.0,
        metal=MetalKernels(columns=columns, ext_from=ext_from, tile_tokens=32),
        pair_reads_below=pair_below,
    )


def test_metal_small_batches_reread_the_weights():
    # a format the small-batch kernel does not take: every token's column reads again
    s = metal_step((0, 0, 2, 3, 4, 5, 3, 4, 4), ext_from=0)
    assert s.weight_bytes_at(3) == pytest.approx(
        3 * 40e6 + 2 * distinct_experts(s.experts, 3) * 2e6
    )
    # one that it takes from 2 tokens: 6 tokens are served by reads of 3 columns
    t = metal_step((0, 0, 2, 3, 4, 5, 3, 4, 4), ext_from=2)
    assert t.weight_bytes_at(6) == pytest.approx(
        2 * 40e6 + 2 * distinct_experts(t.experts, 6) * 2e6
    )
    assert t.weight_bytes_at(9) == pytest.approx(40e6 + 2 * distinct_experts(t.experts, 9) * 2e6)
    # below the pair limit an expert is read for every (token, expert) pair
    u = metal_step((), ext_from=0, pair_below=32)
    assert u.weight_bytes_at(1) == pytest.approx(40e6 + 2 * 8 * 2e6)
    assert u.weight_bytes_at(31) == pytest.approx(40e6 + 2 * 31 * 8 * 2e6)
    assert u.weight_bytes_at(32) == pytest.approx(40e6 + 2 * distinct_experts(u.experts, 32) * 2e6)


def test_a_kernel_switch_gives_the_largest_passing_batch_and_names_the_slow_ones():
    s = metal_step((0, 0, 2, 3, 4, 5, 3, 4, 4), ext_from=0)
    floor = 1 / 0.25  # 250 ms a step
    ok = [b for b in range(1, 200) if s.step_time_s(b, 0.0) <= 0.25]
    edge = bandwidth_concurrency(s, 0.0, floor)
    assert edge == max(ok)
    slow = [b for b in range(1, edge) if b not in ok]
    assert edge > 8
    assert slow  # 4 to 8 streams re-read the 40 MB dense part 4-8 times
    spans = slow_batches(s, 0.0, floor, edge)
    assert [b for a, z in spans for b in range(a, z + 1)] == slow
    # without the kernel switch nothing below the edge is slow
    assert slow_batches(step(), 4096, 10, bandwidth_concurrency(step(), 4096, 10)) == ()
