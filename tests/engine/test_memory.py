"""Weights at effective bits, usable memory, and why 4.0 bits undercounts."""

from __future__ import annotations

import pytest
from backpressure.engine.kv import kv_bytes_per_request
from backpressure.engine.memory import slots, usable_memory_bytes, weights_bytes
from backpressure.engine.units import GIB

OVERHEAD = 2 * GIB  # llama.cpp framework overhead of the worked example

# Typical llama.cpp configs: (model, context, concurrent requests held in memory).
TYPICAL = [
    ("llama-3.1-8b", 8192, 1),
    ("llama-3.1-8b", 4096, 4),
    ("qwen2.5-7b", 8192, 2),
    ("mistral-nemo-12b", 8192, 2),
    ("qwen2.5-14b", 4096, 1),
    ("gemma-2-27b", 4096, 1),
    ("qwen2.5-32b", 4096, 1),
    ("llama-3.3-70b", 8192, 1),
]


def vram_needed(cat, model: str, context: int, requests: int, bits: float) -> int:
    arch = cat.archs[model]
    kv = kv_bytes_per_request(arch.attention, 2, context) * requests
    return weights_bytes(arch.total_params, bits) + kv + OVERHEAD


@pytest.mark.parametrize(("model", "context", "requests"), TYPICAL)
def test_four_bits_undercounts_vram_by_6_to_18_percent(cat, model, context, requests):
    honest = vram_needed(cat, model, context, requests, 4.89)
    naive = vram_needed(cat, model, context, requests, 4.0)
    undercount = (honest - naive) / honest
    assert 0.06 <= undercount <= 0.18, f"{model}: {undercount:.3f}"


def test_weights_only_undercount_is_the_bits_ratio():
    assert 1 - weights_bytes(10**9, 4.0) / weights_bytes(10**9, 4.89) == pytest.approx(
        0.182, abs=1e-3
    )


def test_unquantized_embeddings_cost_extra():
    # AWQ keeps 1.05e9 embedding parameters of Llama-3.1-8B in fp16.
    plain = weights_bytes(8_030_261_248, 4.16)
    split = weights_bytes(8_030_261_248, 4.16, 1_050_673_152, 16)
    assert split - plain == pytest.approx(1_050_673_152 * (16 - 4.16) / 8, abs=1)


def test_usable_memory():
    assert usable_memory_bytes(24 * GIB, None) == 24 * GIB
    assert usable_memory_bytes(192 * GIB, 0.75) == 144 * GIB


def test_slots_floor_and_no_negative():
    assert slots(10, 3) == 3
    assert slots(-5, 3) == 0
    assert slots(5, 0) == 0
