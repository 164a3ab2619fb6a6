"""The MoE step term over several GPUs: experts split by tensor parallelism (vLLM's default)
or dealt out whole (expert parallel, all-to-alls), and the grouped-expert compute."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from backpressure.catalog.loader import load_catalog
from backpressure.engine.serving.model import StepCost
from backpressure.engine.serving.spec import (
    all_reduce,
    eager_layer_s,
    graph_tokens,
    remote_gpus,
    server,
    step_cost,
)
from backpressure.engine.serving.step import distinct_experts, expert_reads, pack, step_time
from backpressure.generator import resolve

GB_S = 1e9  # link bandwidths below are in GB/s
# (decode sequences, KV tokens they hold, prompt tokens): decode steps small and
# large, a mixed step and a prefill-only step
STEPS = [(1, 1_000, 0), (64, 64_000, 0), (256, 256_000, 0), (128, 128_000, 1_024), (0, 0, 2_048)]


def _config(rig: str, model: str) -> resolve.Config:
    return resolve.configure(load_catalog(), rig, "fp8", 8192, model, runtime="vllm")


def _cost(cfg: resolve.Config, link: float | None = None, ep: bool = False) -> StepCost:
    device = cfg.device
    if link is not None:
        device = dataclasses.replace(device, interconnect_bandwidth_bytes_per_s=link)
    runtime = dataclasses.replace(cfg.runtime, expert_parallel=ep)
    cost = step_cost(device, runtime, cfg.fmt, cfg.constants, cfg.arch, cfg.capacity())
    assert cost is not None
    return cost


def _times(cost: StepCost) -> list[float]:
    packed = pack(cost)
    experts = distinct_experts(cost.num_experts, cost.experts_per_token, 4096)
    return [
        step_time(packed, experts, b, kv, p, 0.0, p * p / 2, 1, max(b, 1)) for b, kv, p in STEPS
    ]


def _without_moe_term(cfg: resolve.Config, cost: StepCost) -> StepCost:
    """The same step cost with the MoE term taken out: every layer a plain TP all-reduce
    pair, no dispatch, and the experts' FLOPs at the dense rate."""
    assert cfg.arch is not None
    gpus = cfg.device.count
    latency, per_token = all_reduce(
        cfg.device, cfg.constants, gpus, cfg.arch.num_layers, cfg.arch.hidden_size
    )
    return dataclasses.replace(
        cost,
        allreduce_s=latency,
        allreduce_s_per_token=per_token,
        dispatch_s=0.0,
        dispatch_s_per_token=0.0,
        flops_per_token=cost.flops_per_token + cost.expert_flops_per_token,
        expert_flops_per_token=0.0,
    )


@pytest.mark.parametrize("rig", ["8x-h100-sxm", "4x-h100-sxm", "8x-mi300x"])
def test_moe_term_makes_a_multi_gpu_moe_step_slower(rig: str) -> None:
    cfg = _config(rig, "qwen3-235b-a22b")
    cost = _cost(cfg, ep=True)
    assert cost.dispatch_s > 0.0
    assert cost.dispatch_s_per_token > 0.0
    assert cost.expert_flops_per_token > 0.0
    with_term = _times(cost)
    without = _times(_without_moe_term(cfg, cost))
    for slow, fast in zip(with_term, without, strict=True):
        assert slow > fast


@pytest.mark.parametrize("rig", ["8x-h100-sxm", "4x-h100-sxm", "8x-mi300x"])
def test_vllm_splits_experts_by_tensor_parallelism_unless_told_otherwise(rig: str) -> None:
    cfg = _config(rig, "qwen3-235b-a22b")
    assert cfg.arch is not None
    assert not cfg.runtime.expert_parallel  # vLLM's enable_expert_parallel defaults to False
    split = _cost(cfg, ep=False)
    dealt = _cost(cfg, ep=True)
    # split: no all-to-all, every layer's all-reduce pair, as a dense model's
    assert split.dispatch_s == 0.0
    assert split.dispatch_s_per_token == 0.0
    latency, per_token = all_reduce(
        cfg.device, cfg.constants, cfg.device.count, cfg.arch.num_layers, cfg.arch.hidden_size
    )
    assert split.allreduce_s == latency
    assert split.allreduce_s_per_token == per_token
    # the sliced expert GEMMs run at the tensor-parallel figure, below the one-GPU one
    moe = cfg.constants.serving_moe_efficiency
    assert moe["vllm_tp"] < moe["vllm"]
    assert split.moe_flops_per_s / dealt.moe_flops_per_s == pytest.approx(
        moe["vllm_tp"] / moe["vllm"]
    )
    # on one GPU nothing is split: the one-GPU figure, whatever the flag
    hopper = cfg.constants.serving_compute_efficiency["vllm_hopper"]
    one = _cost(_config("h100-sxm", "qwen3-30b-a3b"), ep=False)
    assert one.dispatch_s == 0.0
    assert one.moe_flops_per_s / one.flops_per_s == pytest.approx(moe["vllm"] / hopper)


def test_dense_model_has_no_moe_term() -> None:
    cost = _cost(_config("8x-h100-sxm", "llama-3.3-70b"))
    assert cost.dispatch_s == 0.0
    assert cost.dispatch_s_per_token == 0.0
    assert cost.expert_flops_per_token == 0.0


def test_moe_step_is_monotone_in_link_bandwidth() -> None:
    cfg = _config("8x-h100-sxm", "qwen3-235b-a22b")
    links = [25 * GB_S, 64 * GB_S, 150 * GB_S, 450 * GB_S, 900 * GB_S]
    times = [_times(_cost(cfg, link, ep=True)) for link in links]
    for slower, faster in itertools.pairwise(times):
        for a, b in zip(slower, faster, strict=True):
            assert a > b  # every step has tokens to move, so more bandwidth is strictly faster
    costs = [_cost(cfg, link, ep=True) for link in links]
    per_token = [c.dispatch_s_per_token for c in costs]
    assert per_token == sorted(per_token, reverse=True)


def test_remote_gpus_by_hand() -> None:
    # 8 GPUs, 8 experts a token: each other GPU is missed with (7/8)^8
    assert remote_gpus(8, 8) == pytest.approx(7 * (1 - (7 / 8) ** 8), rel=1e-15)
    assert remote_gpus(1, 8) == 0.0
    assert [remote_gpus(4, k) for k in range(1, 9)] == sorted(
        remote_gpus(4, k) for k in range(1, 9)
    )


def _llama_cpp_cost(gpu: str) -> StepCost:
    cfg = resolve.configure(load_catalog(), gpu, "q4_k_m", 8192, "qwen3-30b-a3b")
    cost = step_cost(cfg.device, cfg.runtime, cfg.fmt, cfg.constants, cfg.arch, cfg.capacity())
    assert cost is not None
    return cost


def test_metal_streams_an_expert_per_token_pair_below_32_tokens() -> None:
    # llama.cpp's Metal mul_mat_id: one mat-vec per (token, expert) pair below 32 tokens,
    # grouped by expert from 32 on; CUDA groups from 2 tokens on.
    metal, cuda = _llama_cpp_cost("m4-max-128gb"), _llama_cpp_cost("rtx-4090")
    assert (metal.expert_pair_below, cuda.expert_pair_below) == (32, 0)
    k = metal.experts_per_token
    reads = expert_reads(metal, 64)
    distinct = distinct_experts(metal.num_experts, k, 64)
    assert reads[1] == distinct[1] == k
    assert all(reads[t] == t * k > distinct[t] for t in range(2, 32))
    assert list(reads[32:]) == list(distinct[32:])
    assert list(expert_reads(cuda, 64)) == list(distinct)
    # So a 31-sequence decode step on Metal outlasts a 32-sequence one.
    packed = pack(metal)
    t31, t32 = (step_time(packed, reads, b, b * 1_000.0, 0, 0.0, 0.0, 1, b) for b in (31, 32))
    assert t31 > t32


def test_a_late_step_cost_field_at_its_default_leaves_the_seed_key_alone() -> None:
    # The sweep seeds arrivals by the server's repr: a field that changes nothing
    # must not reshuffle every config's arrivals.
    cuda, metal = _llama_cpp_cost("rtx-4090"), _llama_cpp_cost("m4-max-128gb")
    assert "expert_pair_below" not in repr(cuda)
    assert "expert_pair_below=32" in repr(metal)
    assert repr(cuda) == repr(dataclasses.replace(cuda, expert_pair_below=0))


def test_a_vllm_pass_pays_its_own_time_per_moe_layer_not_llama_cpps() -> None:
    # vLLM's fused MoE kernel has a fixed time per MoE layer of its own
    # (serving_moe_layer_overhead_s_vllm); llama.cpp's passes keep the per-platform
    # figure fitted on llama-bench
    from backpressure.engine.capacity import pass_overhead_s

    cat = load_catalog()
    k = resolve.constants(cat)
    vllm_s = k.serving_moe_layer_overhead_s["vllm"]
    llama_s = k.moe_layer_overhead_s["nvidia"]
    assert vllm_s != llama_s
    arch = cat.archs["qwen3-30b-a3b"]
    assert arch.experts is not None
    moe_layers = arch.experts.moe_layers
    for runtime, per_layer in (("vllm", vllm_s), ("llama.cpp", llama_s)):
        quant = "bf16" if runtime == "vllm" else "q8_0"
        cfg = resolve.configure(cat, "h100-sxm", quant, 8192, "qwen3-30b-a3b", runtime=runtime)
        cost = step_cost(cfg.device, cfg.runtime, cfg.fmt, k, cfg.arch, cfg.capacity())
        assert cost is not None
        dense_part = pass_overhead_s(cfg.device, k, cfg.arch, 0.0)
        assert cost.pass_overhead_s == pytest.approx(dense_part + moe_layers * per_layer)


def test_a_vllm_moe_step_too_large_for_a_cuda_graph_pays_the_eager_layers() -> None:
    # vLLM captures graphs up to min(2 max_num_seqs, 512) tokens; one token more
    # and every MoE layer's many small kernels launch from the host.
    cat = load_catalog()
    k = resolve.constants(cat)
    per_layer = k.serving_moe_eager_layer_s["vllm"]
    assert per_layer > 0.0
    cfg = resolve.configure(cat, "h100-sxm", "bf16", 8192, "qwen3-30b-a3b", runtime="vllm")
    cap = cfg.capacity()
    srv = server(cfg.device, cfg.runtime, cfg.fmt, k, cfg.arch, cap, 1024, 128, 1.0, 60.0)
    assert srv is not None
    assert cfg.arch is not None
    assert cfg.arch.experts is not None
    cost = srv.cost
    limit = srv.scheduler.max_seqs * 2
    assert cost.graph_tokens == graph_tokens(srv.scheduler.max_seqs, 8192) == min(limit, 512)
    assert cost.eager_s == pytest.approx(cfg.arch.experts.moe_layers * per_layer)
    packed = pack(cost)
    experts = distinct_experts(cost.num_experts, cost.experts_per_token, 1024)

    def prefill(tokens: int) -> float:
        return step_time(packed, experts, 0, 0.0, tokens, 0.0, tokens * tokens / 2, 1, 1)

    at, above = cost.graph_tokens, cost.graph_tokens + 1
    assert prefill(above) - prefill(at) > cost.eager_s
    # a lower max_num_seqs captures fewer sizes: with 64, a step of 129 tokens runs eagerly
    small = server(cfg.device, cfg.runtime, cfg.fmt, k, cfg.arch, cap, 1024, 128, 1.0, 60.0, 64)
    assert small is not None
    assert small.cost.graph_tokens == 128
    # a dense model has no such term: its layers' share is inside the fitted dense constants
    dense = resolve.configure(cat, "h100-sxm", "bf16", 8192, "llama-3.1-8b", runtime="vllm")
    dense_cost = step_cost(dense.device, dense.runtime, dense.fmt, k, dense.arch, dense.capacity())
    assert dense_cost is not None
    assert (dense_cost.graph_tokens, dense_cost.eager_s) == (0, 0.0)


def test_the_eager_moe_layer_time_on_several_gpus_is_its_own() -> None:
    # on several GPUs each eagerly launched collective waits for the slowest host
    k = resolve.constants(load_catalog())
    one, several = (
        k.serving_moe_eager_layer_s["vllm"],
        k.serving_moe_eager_layer_s["vllm_multi_gpu"],
    )
    assert one != several
    assert eager_layer_s(k, "vllm", 1) == one
    assert eager_layer_s(k, "vllm", 8) == several
    assert eager_layer_s(k, "llama.cpp", 1) == 0.0
    bare = dataclasses.replace(k, serving_moe_eager_layer_s={"vllm": one})
    assert eager_layer_s(bare, "vllm", 8) == one  # no figure of its own: the one-GPU one
