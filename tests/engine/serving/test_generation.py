"""A generation's own compute efficiency: Hopper GPUs take theirs, the others the common one."""

from __future__ import annotations

import dataclasses

from backpressure.catalog.loader import load_catalog
from backpressure.engine.serving.spec import step_cost
from backpressure.generator import resolve


def _flops_share(gpu: str, generation: str | None = None) -> float:
    """The step's FLOP/s over the device's peak, for Llama 3.1 8B bf16 on vLLM."""
    cfg = resolve.configure(load_catalog(), gpu, "bf16", 8192, "llama-3.1-8b", runtime="vllm")
    device = cfg.device
    if generation is not None:
        device = dataclasses.replace(device, generation=generation)
    cost = step_cost(device, cfg.runtime, cfg.fmt, cfg.constants, cfg.arch, cfg.capacity())
    assert cost is not None
    assert device.bf16_flops_per_s is not None
    return cost.flops_per_s / device.bf16_flops_per_s


def test_hopper_takes_its_own_efficiency_and_others_the_common_one() -> None:
    k = resolve.constants(load_catalog()).serving_compute_efficiency
    assert resolve.device_for(load_catalog(), "h100-sxm").generation == "hopper"
    assert _flops_share("h100-sxm") == k["vllm_hopper"]
    assert _flops_share("h200-sxm") == k["vllm_hopper"]
    assert _flops_share("a100-80gb-sxm") == k["vllm"]
    assert k["vllm_hopper"] != k["vllm"]


def test_the_figure_follows_the_generation_not_the_part() -> None:
    k = resolve.constants(load_catalog()).serving_compute_efficiency
    assert _flops_share("h100-sxm", generation="ampere") == k["vllm"]
    assert _flops_share("a100-80gb-sxm", generation="hopper") == k["vllm_hopper"]
