"""Checkpoints no catalog quant describes, priced as they are stored for the KV checks."""

from __future__ import annotations

import pytest
from backpressure.engine.capacity import model_weights_bytes
from backpressure.engine.units import GIB
from backpressure.generator.accuracy.archs import extra_archs
from backpressure.generator.accuracy.kv import selective_nvfp4

CASCADE = "chankhavu/Nemotron-Cascade-2-30B-A3B-NVFP4"


def test_the_selective_nvfp4_recipe_gives_the_logged_weights() -> None:
    arch = extra_archs()[CASCADE]
    fmt = selective_nvfp4(CASCADE)
    # between NVFP4's 4.5 bits and BF16: 372.7M projections of attention and of the
    # six Mamba layers before it stay 16-bit beside 30.49B NVFP4 weights
    assert 4.6 < fmt.bits_per_weight < 4.7
    weights = model_weights_bytes(arch, fmt, arch.total_params) / GIB
    # vLLM 0.19.1 on an H100 logs "Model loading took 18.03 GiB" (asp-arc slurm logs)
    assert abs(weights / 18.03 - 1) < 0.005


def test_blackwell_pads_the_squared_relu_experts_to_128_rows() -> None:
    arch = extra_archs()[CASCADE]
    hopper = model_weights_bytes(arch, selective_nvfp4(CASCADE, "hopper"), arch.total_params)
    blackwell = model_weights_bytes(arch, selective_nvfp4(CASCADE, "blackwell"), arch.total_params)
    # 1,856 -> 1,920 rows: 64 more of both 2,688-wide matrices, at 4.5 bits, in 128
    # experts of 23 layers (vLLM logs 18.54 GiB on an RTX 5090 against 18.03 on an H100)
    assert blackwell - hopper == pytest.approx(23 * 128 * 64 * 2688 * 2 * 4.5 / 8, abs=8)
    # split over two GPUs, 928 rows pad to 1,024
    two = selective_nvfp4(CASCADE, "blackwell", 2)
    assert two.bits_per_weight > selective_nvfp4(CASCADE, "blackwell").bits_per_weight
