"""Capacity of one device x model x quant x context: SPEC §2, §3 and §5 in one call.

    weights      = total_params x effective_bits / 8
    KV budget    = usable_memory - weights - framework_overhead
    KV / request = kv_bytes_per_token x context_tokens   (windows capped)
    slots        = floor(KV budget / KV per request)

then the decode ceiling from memory bandwidth, which ceiling binds, and the band.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from backpressure.engine.arch import ModelArch
from backpressure.engine.bands import error_band
from backpressure.engine.ceilings import StepModel, bandwidth_concurrency, binding_ceiling
from backpressure.engine.inputs import DEFAULT_LAYERS, Constants, Device, Runtime, WeightFormat
from backpressure.engine.kv import (
    kv_bytes_per_request,
    kv_bytes_per_token,
    kv_bytes_per_token_heuristic,
)
from backpressure.engine.memory import slots as slot_count
from backpressure.engine.memory import usable_memory_bytes, weights_bytes
from backpressure.engine.results import CapacityResult, Ceiling, KvBasis


def overhead_bytes(runtime: Runtime, device: Device) -> int:
    """Memory the runtime keeps from the KV cache besides the weights [bytes].

    llama.cpp style: a fixed framework overhead per GPU. vLLM style: the share of
    memory outside ``gpu_memory_utilization``, the activation peak of its profiling
    batch (whose default size grows on large GPUs), non-torch memory, and
    all-reduce buffers per GPU under tensor parallelism.
    """
    if runtime.style == "fixed-overhead":
        return runtime.framework_overhead_bytes * device.count
    usable = usable_memory_bytes(device.memory_bytes, device.usable_memory_fraction) * device.count
    unclaimed = usable - math.floor(usable * runtime.gpu_memory_utilization)
    large = runtime.large_gpu_memory_bytes and device.memory_bytes >= runtime.large_gpu_memory_bytes
    tokens = runtime.large_gpu_max_num_batched_tokens if large else runtime.max_num_batched_tokens
    activation = math.ceil(tokens * runtime.activation_bytes_per_batched_token)
    tp_extra = runtime.tp_extra_bytes_per_gpu if device.count > 1 else 0
    per_gpu = activation + runtime.non_torch_bytes + tp_extra
    return unclaimed + per_gpu * device.count


def kv_replication(device: Device, runtime: Runtime, arch: ModelArch | None) -> int:
    """How many copies of each KV head a tensor-parallel rig keeps in total.

    Tensor parallelism shards KV heads across GPUs; with fewer KV heads than
    GPUs each head is replicated, and an MLA latent (one per layer) is stored
    whole on every GPU.
    """
    if device.count == 1 or runtime.multi_gpu != "tensor-parallel" or arch is None:
        return 1
    if arch.attention.mla_latent_dim:
        return device.count
    return max(1, device.count // min(device.count, arch.attention.num_kv_heads))


def parallel(device: Device, runtime: Runtime) -> int:
    """GPUs working on one step at once: all under tensor parallelism, one under layer split."""
    return device.count if runtime.multi_gpu == "tensor-parallel" else 1


def peak_flops(device: Device, runtime: Runtime, fmt: WeightFormat) -> float | None:
    """Dense peak FLOP/s the step can use: FP8 for FP8 weights where the chip has it."""
    flops = device.fp8_flops_per_s if fmt.fp8_compute and device.fp8_flops_per_s else None
    flops = flops or device.bf16_flops_per_s
    return float(flops * parallel(device, runtime)) if flops else None


def _step_model(
    device: Device,
    runtime: Runtime,
    fmt: WeightFormat,
    constants: Constants,
    arch: ModelArch | None,
    active: int,
    weights: int,
    kv_per_token_avg: float,
) -> StepModel | None:
    if device.bandwidth_bytes_per_s is None:
        return None
    platform = "cpu" if device.memory_kind == "system" else device.platform
    # Fixed cost per layer per step (kernel launches, synchronisation), more for an
    # MoE layer (one small matrix product per routed expert), plus two all-reduces
    # per layer under tensor parallelism.
    layers = arch.num_layers if arch is not None else DEFAULT_LAYERS
    overhead = layers * constants.layer_overhead_s[platform]
    if arch is not None and arch.experts is not None:
        e = arch.experts
        overhead += e.moe_layers * e.experts_per_token * constants.moe_expert_overhead_s
    if device.count > 1 and runtime.multi_gpu == "tensor-parallel" and device.interconnect:
        overhead += 2 * layers * constants.allreduce_latency_s[device.interconnect]
    flops = peak_flops(device, runtime, fmt)
    bandwidth = device.bandwidth_bytes_per_s * parallel(device, runtime)
    return StepModel(
        weights_bytes=weights,
        total_params=arch.total_params if arch is not None else active,
        active_params=active,
        experts=arch.experts if arch is not None else None,
        kv_bytes_per_token=kv_per_token_avg,
        bandwidth_bytes_per_s=constants.bandwidth_efficiency[platform] * bandwidth,
        overhead_s=overhead,
        compute_per_seq_s=2 * active / (constants.decode_compute_efficiency * flops)
        if flops
        else 0.0,
    )


@dataclass(frozen=True, slots=True)
class _Memory:
    weights: int
    per_token: int
    per_request: int
    basis: KvBasis


def _memory(
    device: Device,
    runtime: Runtime,
    fmt: WeightFormat,
    constants: Constants,
    context: int,
    kv_bytes_per_element: float,
    arch: ModelArch | None,
    total: int,
) -> _Memory:
    if arch is None:
        per_token = kv_bytes_per_token_heuristic(total, constants.kv_heuristic_mib_per_billion)
        return _Memory(
            weights_bytes(total, fmt.bits_per_weight), per_token, per_token * context, "heuristic"
        )
    repl = kv_replication(device, runtime, arch)
    return _Memory(
        weights_bytes(total, fmt.bits_per_weight, arch.embedding_params, fmt.embedding_bits),
        kv_bytes_per_token(arch.attention, kv_bytes_per_element) * repl,
        kv_bytes_per_request(arch.attention, kv_bytes_per_element, context) * repl,
        "exact",
    )


def estimate(
    device: Device,
    runtime: Runtime,
    fmt: WeightFormat,
    constants: Constants,
    context: int,
    kv_bytes_per_element: float,
    arch: ModelArch | None = None,
    params: int | None = None,
) -> CapacityResult:
    """Cost one config.

    Parameters
    ----------
    device, runtime, fmt, constants
        The hardware, the serving framework, the weight format and calibration.
    context : int
        Context length each request reserves [tokens].
    kv_bytes_per_element : float
        KV-cache element size [bytes].
    arch : ModelArch or None
        Exact architecture; when None, ``params`` and the KV heuristic are used.
    params : int or None
        Parameter count for a model known only by size [parameters].

    Returns
    -------
    CapacityResult
        Slots, both ceilings, which binds, and the error band.
    """
    if arch is None and not params:
        raise ValueError("estimate needs an architecture or a parameter count")
    if context <= 0:
        raise ValueError("context must be positive")
    total = arch.total_params if arch is not None else int(params or 0)
    active = arch.active_params if arch is not None else total
    mem = _memory(device, runtime, fmt, constants, context, kv_bytes_per_element, arch, total)
    usable = usable_memory_bytes(device.memory_bytes, device.usable_memory_fraction) * device.count
    overhead = overhead_bytes(runtime, device)
    budget = usable - mem.weights - overhead
    n_slots = slot_count(budget, mem.per_request)
    per_token_avg = mem.per_request / context
    streamed = active - (arch.lookup_only_params if arch is not None else 0)
    step = _step_model(device, runtime, fmt, constants, arch, streamed, mem.weights, per_token_avg)
    per_stream_kv = context / 2  # a stream is, on average, halfway through its context
    flops = peak_flops(device, runtime, fmt)
    if step is not None:
        bw_conc: int | None = bandwidth_concurrency(
            step, per_stream_kv, constants.min_stream_tokens_per_s
        )
        binding: Ceiling | None = binding_ceiling(n_slots, bw_conc or 0, step, per_stream_kv)
        effective = min(n_slots, max(bw_conc or 0, 1))
    else:
        bw_conc, binding, effective = None, None, n_slots
    band = error_band(
        device.memory_kind,
        total,
        device.count,
        arch is not None and arch.is_moe,
        mem.basis == "heuristic",
        flops is not None,
        step is not None,
        n_slots,
    )
    return CapacityResult(
        fits=n_slots >= 1,
        slots=n_slots,
        memory_bytes=device.memory_bytes * device.count,
        usable_memory_bytes=usable,
        weights_bytes=mem.weights,
        overhead_bytes=overhead,
        kv_budget_bytes=budget,
        kv_bytes_per_token=mem.per_token,
        kv_bytes_per_request=mem.per_request,
        kv_capacity_tokens=max(0, math.floor(budget / per_token_avg)),
        kv_basis=mem.basis,
        context_tokens=context,
        total_params=total,
        active_params=active,
        step_fixed_s=(
            step.weight_bytes_at(max(1, effective)) / step.bandwidth_bytes_per_s + step.overhead_s
            if step
            else None
        ),
        step_per_kv_token_s=per_token_avg / step.bandwidth_bytes_per_s if step else None,
        step_compute_per_seq_s=step.compute_per_seq_s if step else None,
        decode_tokens_per_s=1.0 / step.step_time_s(1, per_stream_kv) if step else None,
        prefill_tokens_per_s=constants.prefill_compute_efficiency * flops / (2 * streamed)
        if flops
        else None,
        bandwidth_concurrency=bw_conc,
        effective_concurrency=effective,
        binding_ceiling=binding,
        error_band_pct=band.pct,
        error_band_reason=band.reason,
    )
