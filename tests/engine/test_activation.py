"""vLLM's profiled activation peak: sampler, forward pass and fused-MoE workspace, by release."""

from __future__ import annotations

from dataclasses import replace

from backpressure.engine.arch import Attention, Experts, ModelArch
from backpressure.engine.capacity import activation_bytes
from backpressure.engine.inputs import Device, Runtime
from backpressure.engine.units import GIB

H100 = Device("H100", "discrete", "nvidia", 80 * GIB, None)
RTX = Device("12 GB", "discrete", "nvidia", 12 * GIB, None)
VLLM = Runtime(
    "vllm",
    "memory-utilization",
    "tensor-parallel",
    max_num_batched_tokens=2048,
    large_gpu_memory_bytes=70 * GIB,
    large_gpu_max_num_batched_tokens=8192,
    max_num_seqs=256,
    large_gpu_max_num_seqs=1024,
    activation_bytes_per_batched_token=1000.0,
    version="0.19.0",
    sampler_peak_since="0.19.0",
    sampler_bytes_per_logit=16.0,
)
# Llama-3.1-8B's widths (config.json: hidden 4096, intermediate 14336, vocab 128256)
DENSE = ModelArch(
    name="dense",
    num_layers=32,
    hidden_size=4096,
    vocab_size=128256,
    max_context=131072,
    dtype_bytes=2,
    attention=Attention(num_heads=32, num_kv_heads=8, head_dim=128, window_per_layer=(0,) * 32),
    total_params=8_030_261_248,
    active_params=8_030_261_248,
    intermediate_size=14336,
)


def test_the_sampler_sets_the_peak_at_the_default_sequences():
    # 1,024 sequences on an 80 GB GPU: logits of the whole vocabulary each
    assert activation_bytes(VLLM, H100, DENSE) == 16 * 1024 * 128256
    # the peak follows the vocabulary, not the model's size
    small_vocab = replace(DENSE, vocab_size=32016)
    forward = 8192 * 2 * (3 * 14336 + 4 * 4096)
    assert activation_bytes(VLLM, H100, small_vocab) == forward


def test_few_sequences_leave_the_forward_pass():
    few = replace(VLLM, max_num_seqs=2)
    assert activation_bytes(few, RTX, DENSE) == 2048 * 2 * (3 * 14336 + 4 * 4096)
    # tensor parallelism splits the MLP's width, not the hidden size
    two = replace(RTX, count=2)
    assert activation_bytes(few, two, DENSE) == 2048 * 2 * (3 * 14336 // 2 + 4 * 4096)


def test_the_fused_moe_workspace_adds_to_the_peak():
    # 128 experts of width 768, 8 routed per token, no dense MLP (Qwen3-30B-A3B's shape)
    experts = Experts(128, 8, 3 * 2048 * 768, 48)
    moe = replace(DENSE, hidden_size=2048, vocab_size=151936, experts=experts)
    workspace = 8192 * 2 * 8 * (3 * 768 + 2048)
    assert activation_bytes(VLLM, H100, moe) == 16 * 1024 * 151936 + workspace


def test_older_releases_and_unknown_models_keep_one_figure_per_batched_token():
    old = replace(VLLM, version="0.13.0")
    assert activation_bytes(old, H100, DENSE) == 8192 * 1000
    assert activation_bytes(VLLM, H100, None) == 8192 * 1000
    # V0 profiled a max_model_len-sized batch
    v0 = replace(VLLM, version="0.6.4", v1_since="0.8.0")
    assert activation_bytes(v0, H100, DENSE, context=32768) == 32768 * 1000


def test_an_a100_keeps_the_small_defaults_whatever_its_memory():
    # vLLM keeps 2,048 batched tokens and 256 sequences on any A100 (arg_utils.py)
    a100 = Device("A100 80GB SXM", "discrete", "nvidia", 80 * GIB, None)
    rt = replace(VLLM, small_defaults_name="a100")
    assert activation_bytes(rt, a100, DENSE) == 16 * 256 * 128256
    assert activation_bytes(rt, H100, DENSE) == 16 * 1024 * 128256
