"""Runtime allocators: vLLM's hybrid pool and llama.cpp's cells, against logged startup lines."""

from __future__ import annotations

from dataclasses import replace

import pytest
from backpressure.engine.arch import Attention, ModelArch, Recurrent
from backpressure.engine.capacity import overhead_bytes, release, since
from backpressure.engine.inputs import Device, Runtime
from backpressure.engine.kv import (
    cache_bytes_per_request,
    kv_bytes_per_request,
    kv_bytes_per_token,
)
from backpressure.engine.kv_pool import llama_cpp_cells, llama_cpp_request_bytes, vllm_pool
from backpressure.engine.units import GIB


def test_qwen3_next_block_grows_to_hold_a_state_and_matches_the_log(cat):
    # kyuz0 R9700 TP2 log (vLLM 0.13): "Setting attention block size to 544 tokens",
    # "Available KV cache memory: 7.09 GiB", "GPU KV cache size: 154,496 tokens",
    # "Maximum concurrency for 16,384 tokens per request: 33.47x".
    pool = vllm_pool(cat.archs["qwen3-next-80b-a3b"], 2.0, 16384, 2048, gpus=2)
    assert pool.block == 544
    assert (pool.group_size, pool.groups) == (12, 4)
    avail = int(7.09 * GIB)
    assert pool.reported_tokens(avail) == 154_496
    assert pool.max_concurrency(avail) == pytest.approx(33.47, abs=0.01)


def test_granite_h_small_block_and_padding_match_vllms_log(cat):
    # vLLM 0.11.1 start of ibm-granite/granite-4.0-h-small (ROCm issue 5590):
    # "Setting attention block size to 528 tokens", "Padding mamba page size by
    # 0.69%": one attention page of 528 tokens x 2 x 8 KV heads x 128 x 2 bytes
    # against a Mamba-2 state of (3 x 8448 + 128 x 64 x 128) x 2 bytes
    pool = vllm_pool(cat.archs["granite-4.0-h-small"], 2.0, 131072, 8192, gpus=1)
    assert pool.block == 528
    state = (3 * 8448 + 128 * 64 * 128) * 2
    assert round(100 * (pool.page_bytes - state) / state, 2) == 0.69
    # 4 attention layers and 36 Mamba-2 layers in groups of 4: one full, nine state
    assert (pool.group_size, pool.groups) == (4, 10)


def test_gpt_oss_sliding_layers_keep_window_plus_step_budget(cat):
    # RTX 3090, vLLM 0.12: 7.12 GiB -> 155,584 tokens, 16.75x at 16,384 tokens.
    pool = vllm_pool(cat.archs["gpt-oss-20b"], 2.0, 16384, 2048)
    # sliding: cdiv(128 - 1 + 2048, 16) + 1 pages; full: 16384 / 16 pages
    assert pool.pages_per_request == (-(-2175 // 16) + 1) + 1024
    avail = int(7.12 * GIB)
    assert pool.reported_tokens(avail) == pytest.approx(155_584, rel=0.001)
    assert pool.max_concurrency(avail) == pytest.approx(16.75, abs=0.01)


def test_vllm_reports_full_attention_equivalent_tokens_for_gemma3(cat):
    # 5 sliding groups + 1 full group of 8 layers: the logged count is the budget over
    # all 48 layers' per-token cost, although sliding layers keep only their window.
    arch = cat.archs["gemma-3-12b"]
    pool = vllm_pool(arch, 2.0, 9900, 2048)
    assert (pool.group_size, pool.groups) == (8, 6)
    avail = int(16.25 * GIB)
    assert pool.reported_tokens(avail) == pytest.approx(44_368, rel=0.001)
    # a request holds less than full attention, more than the windows alone
    # (sliding layers keep window - 1 + max_num_batched_tokens tokens)
    assert pool.request_bytes() < kv_bytes_per_token(arch.attention, 2.0) * 9900
    assert pool.request_bytes() > kv_bytes_per_request(arch.attention, 2.0, 9900)


def test_llama_cpp_swa_cells():
    # gpt-oss-20b on Metal (llama.cpp PR #17609): SWA half 768 cells
    assert llama_cpp_cells(128, 4096, 512) == 768
    # gemma-4-E4B (GenieX PR #1346): pad(min(4096, 512 + 512), 256) -> 1536 with n_swa 1024
    assert llama_cpp_cells(1024, 4096, 512) == 1536
    assert llama_cpp_cells(512, 8192, 512, swa_full=True) == 8192
    assert llama_cpp_cells(0, 1000, 512) == 1024


def test_recurrent_state_is_fixed_per_sequence(cat):
    arch = cat.archs["qwen3-next-80b-a3b"]
    short = cache_bytes_per_request(arch, 2.0, 2.0, 1024)
    long_ = cache_bytes_per_request(arch, 2.0, 2.0, 2048)
    per_token = 12 * 2 * 2 * 256 * 2  # 12 full layers x K,V x 2 KV heads x 256 x 2 bytes
    assert long_ - short == per_token * 1024
    # llama.cpp keeps the 36 states in float32
    state = 36 * (3 * 8192 + 32 * 128 * 128) * 4
    assert llama_cpp_request_bytes(arch, 2.0, 1024, 512) == per_token * 1024 + state


def test_mamba_layers_cost_a_state_not_tokens():
    attn = Attention(32, 8, 128, (0,) * 4)
    arch = ModelArch(
        "hybrid",
        40,
        4096,
        1000,
        4096,
        2,
        attn,
        1,
        1,
        recurrent=Recurrent("mamba", 36, 3 * 8448, 128 * 64 * 128),
    )
    assert arch.layout() == "4 full + 36 mamba"
    pool = vllm_pool(arch, 2.0, 8192, 2048)
    assert pool.block % 16 == 0
    assert pool.block * 2 * 8 * 128 * 2 >= (3 * 8448 + 128 * 64 * 128) * 2


def test_release_and_since():
    assert release("0.13.0rc2.dev112+g763963aa7") == (0, 13, 0)
    assert release("") == ()
    rt = Runtime("vllm", "memory-utilization", "tensor-parallel", version="0.19.0")
    assert not since(rt, "0.21.0")
    assert since(rt, "0.8.0")
    assert not since(rt, "")
    assert since(replace(rt, version=""), "0.21.0")


def test_budget_by_release():
    dev = Device("80 GB", "discrete", "nvidia", 80 * GIB, None)
    base = Runtime(
        "vllm",
        "memory-utilization",
        "tensor-parallel",
        gpu_memory_utilization=0.9,
        max_num_batched_tokens=2048,
        activation_bytes_per_batched_token=1000.0,
        v1_since="0.8.0",
        cudagraph_counted_since="0.21.0",
        cudagraph_bytes_per_gpu=GIB,
    )
    v19 = overhead_bytes(replace(base, version="0.19.0"), dev, 32768)
    v21 = overhead_bytes(replace(base, version="0.21.0"), dev, 32768)
    v06 = overhead_bytes(replace(base, version="0.6.4"), dev, 32768)
    assert v21 - v19 == GIB  # the CUDA-graph pool counts from 0.21
    assert v06 - v19 == (32768 - 2048) * 1000  # V0 profiles a max_model_len batch
