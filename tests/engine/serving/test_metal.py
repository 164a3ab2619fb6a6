"""llama.cpp's Metal matrix kernels in the step model: up to 8 tokens a pass, mat-vec
kernels that read a dense weight once per group of columns (the small-batch kernel,
for its formats and row lengths) or once per token; above 8, 32-token tiles that
compute whole. Elsewhere a pass reads the weights once and computes its tokens."""

from __future__ import annotations

import dataclasses

import pytest
from backpressure.catalog.loader import load_catalog
from backpressure.engine.serving.model import StepCost
from backpressure.engine.serving.spec import step_cost
from backpressure.engine.serving.step import expert_reads, pack, step_time
from backpressure.generator import resolve


def _cost(gpu: str, model: str, quant: str) -> StepCost:
    cfg = resolve.configure(load_catalog(), gpu, quant, 8192, model)
    cost = step_cost(cfg.device, cfg.runtime, cfg.fmt, cfg.constants, cfg.arch, cfg.capacity())
    assert cost is not None
    return cost


def _decode_s(cost: StepCost, batch: int) -> float:
    return step_time(pack(cost), expert_reads(cost, 64), batch, 0.0, 0, 0.0, 0.0, 1, batch)


def test_the_small_batch_kernel_reads_weights_once_per_column_group() -> None:
    cost = _cost("m2-ultra-192gb", "qwen2.5-7b", "q8_0")  # Q8_0, 3,584-wide rows
    assert cost.ext_from == 2
    assert cost.tile_tokens == 32
    read_s = cost.weight_bytes / cost.bandwidth_bytes_per_s
    # 5 tokens: one read (5 columns); 6 tokens: two (3 + 3)
    assert _decode_s(cost, 6) - _decode_s(cost, 5) == pytest.approx(read_s, rel=0.02)
    assert _decode_s(cost, 5) - _decode_s(cost, 2) < 0.05 * read_s


def test_rows_off_the_kernels_multiple_read_the_weights_once_per_token() -> None:
    cost = _cost("m2-ultra-192gb", "gpt-oss-20b", "mxfp4")  # 2,880-wide rows: 2880 % 128 != 0
    assert cost.ext_from == 0
    read_s = cost.weight_bytes / cost.bandwidth_bytes_per_s
    steps = [_decode_s(cost, b) for b in range(1, 9)]
    experts_s = cost.expert_bytes * cost.experts_per_token / cost.bandwidth_bytes_per_s
    for b in range(1, 8):  # each more token: one more read of the dense weights and its k experts
        assert steps[b] - steps[b - 1] == pytest.approx(read_s + experts_s, rel=0.02)


def test_a_tile_computes_32_tokens_filled_or_not() -> None:
    cost = _cost("m2-ultra-192gb", "qwen2.5-7b", "q8_0")
    bound = dataclasses.replace(cost, bandwidth_bytes_per_s=1e30)  # compute binds
    assert _decode_s(bound, 9) == pytest.approx(_decode_s(bound, 32), rel=0.01)
    assert _decode_s(bound, 33) > 1.9 * _decode_s(bound, 32) - bound.pass_overhead_s


def test_other_platforms_and_runtimes_read_once_and_compute_their_tokens() -> None:
    for gpu, quant in (("rtx-4090", "q8_0"), ("h100-sxm", "bf16")):
        cost = _cost(gpu, "qwen2.5-7b", quant)
        assert (cost.mat_vec_columns, cost.ext_from, cost.tile_tokens) == ((), 0, 0)
        assert _decode_s(cost, 8) - _decode_s(cost, 2) < 0.05 * _decode_s(cost, 2)


@pytest.mark.parametrize(
    ("model", "quant"),
    [("qwen2.5-7b", "q8_0"), ("llama-3.1-8b", "q4_k_m"), ("gpt-oss-20b", "mxfp4")],
)
def test_the_capacity_ceiling_reads_the_weights_as_the_serving_step_does(model, quant) -> None:
    # the bandwidth ceiling on a config's page and the simulation behind its
    # serving numbers follow the same kernel rules, batch by batch
    from backpressure.engine.capacity import _step_model

    cfg = resolve.configure(load_catalog(), "m2-ultra-192gb", quant, 8192, model)
    # memory-bound throughout: the reads alone set the step
    cost = dataclasses.replace(
        _cost("m2-ultra-192gb", model, quant), flops_per_s=1e30, moe_flops_per_s=1e30
    )
    cap = cfg.capacity()
    arch = cfg.arch
    assert arch is not None
    step = _step_model(
        cfg.device,
        cfg.runtime,
        cfg.fmt,
        cfg.constants,
        arch,
        arch.active_params - arch.lookup_only_params,
        cap.weights_bytes,
        1.0,
        0.0,
    )
    assert step is not None
    no_weights = dataclasses.replace(cost, weight_bytes=0.0, expert_bytes=0.0)
    serving_reads = [
        (_decode_s(cost, b) - _decode_s(no_weights, b)) * cost.bandwidth_bytes_per_s
        for b in range(1, 40)
    ]
    ceiling_reads = [step.weight_bytes_at(b) for b in range(1, 40)]
    # in units of one batch-1 read: the two models' byte splits differ slightly
    for b in range(1, 39):
        assert serving_reads[b] / serving_reads[0] == pytest.approx(
            ceiling_reads[b] / ceiling_reads[0], rel=0.03
        ), b + 1
