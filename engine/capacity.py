"""Capacity of one device x model x quant x context: SPEC §2, §3 and §5 in one call.

    weights      = total_params x effective_bits / 8
    KV budget    = usable_memory - weights - framework_overhead
    KV / request = kv_bytes_per_token x context_tokens   (windows capped)
    slots        = floor(KV budget / KV per request)

then the decode ceiling from memory bandwidth, which ceiling binds, and the band.

"KV / request" is what the runtime charges one request
(:mod:`backpressure.engine.kv_pool`): vLLM's worst-case pages (sliding layers
keep ``window - 1 + max_num_batched_tokens`` tokens, recurrent layers one state
page), llama.cpp's padded cells. ``kv_capacity_tokens`` is the pool in the
runtime's own words: for vLLM its "GPU KV cache size" line, a
full-attention-equivalent token count.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from backpressure.engine.arch import ModelArch
from backpressure.engine.bands import error_band
from backpressure.engine.ceilings import (
    StepModel,
    bandwidth_concurrency,
    binding_ceiling,
    slow_batches,
    split_weight_bytes,
)
from backpressure.engine.inputs import DEFAULT_LAYERS, Constants, Device, Runtime, WeightFormat
from backpressure.engine.kernels import NO_METAL, metal_kernels, pair_reads_below
from backpressure.engine.kv import (
    cache_bytes_per_request,
    kv_bytes_per_token,
    kv_bytes_per_token_heuristic,
    state_bytes_per_request,
    vllm_state_bytes_per_request,
)
from backpressure.engine.kv_pool import VllmPool, llama_cpp_request_bytes, vllm_pool
from backpressure.engine.memory import slots as slot_count
from backpressure.engine.memory import usable_memory_bytes, weights_bytes
from backpressure.engine.results import CapacityResult, Ceiling, KvBasis

ACTIVATION_BYTES = 2  # bf16 activations: vLLM's forward pass and its all-reduces


def release(version: str) -> tuple[int, ...]:
    """A release string as numbers: ``0.13.0rc2.dev112+g76`` -> ``(0, 13, 0)``."""
    m = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", version)
    return tuple(int(g) for g in m.groups() if g is not None) if m else ()


def since(runtime: Runtime, first: str) -> bool:
    """Whether the profile's release has a behaviour that began in ``first``.

    An unset ``first`` means the behaviour does not apply; an unset profile
    version means the newest release.
    """
    if not first:
        return False
    return not runtime.version or release(runtime.version) >= release(first)


def large_defaults(runtime: Runtime, device: Device) -> bool:
    """Whether vLLM gives this device its larger scheduler defaults.

    GPUs with at least ``large_gpu_memory_bytes`` whose name does not contain
    ``small_defaults_name`` (vLLM keeps an 80 GB A100 at the small ones).
    """
    name = runtime.small_defaults_name.lower()
    return (
        runtime.large_gpu_memory_bytes > 0
        and device.memory_bytes >= runtime.large_gpu_memory_bytes
        and not (name and name in device.name.lower())
    )


def batched_tokens(runtime: Runtime, device: Device) -> int:
    """The default step budget ``max_num_batched_tokens`` on this device [tokens]."""
    if large_defaults(runtime, device):
        return runtime.large_gpu_max_num_batched_tokens
    return runtime.max_num_batched_tokens


def batched_seqs(runtime: Runtime, device: Device) -> int:
    """The default ``max_num_seqs`` on this device, at most its token budget [-]."""
    seqs = runtime.large_gpu_max_num_seqs if large_defaults(runtime, device) else 0
    return min(seqs or runtime.max_num_seqs, batched_tokens(runtime, device))


def sampler_logits(runtime: Runtime, device: Device, arch: ModelArch) -> int:
    """Logits of vLLM's profiling sampler run: ``max_num_seqs`` x vocabulary [-]."""
    return batched_seqs(runtime, device) * arch.vocab_size


def activation_bytes(
    runtime: Runtime, device: Device, arch: ModelArch | None, context: int = 0
) -> int:
    """Torch activation peak of vLLM's profiling run, per GPU [bytes].

    From ``sampler_peak_since`` on, the larger of two peaks that do not overlap:
    the sampler's (``sampler_bytes_per_logit`` per logit of ``max_num_seqs`` x
    vocabulary: fp32 logits and the copies its sort and softmax keep) and the
    forward pass's (bf16 tensors live at an MLP: its matrices' widths, four of
    hidden size, per batched token), plus the fused-MoE workspace that stays
    allocated (an expert's matrix widths split over the GPUs and one of hidden
    size, per batched token and routed expert). Before that release, or for a
    model known only by size, one figure per batched token.
    """
    tokens = batched_tokens(runtime, device)
    if runtime.v1_since and not since(runtime, runtime.v1_since):
        tokens = max(tokens, context)
    new = runtime.sampler_bytes_per_logit and since(runtime, runtime.sampler_peak_since)
    if arch is None or not new:
        return math.ceil(tokens * runtime.activation_bytes_per_batched_token)
    tp = parallel(device, runtime)
    sampler = runtime.sampler_bytes_per_logit * sampler_logits(runtime, device, arch)
    # an MLP's tensors per token: its matrices' widths (gate and up outputs and the
    # down input), split over the GPUs; a dense MLP counts as gated, as the catalog's are
    e = arch.experts
    widths = (
        3 * arch.intermediate_size if e is None else e.shared_params_per_layer // arch.hidden_size
    )
    forward = tokens * ACTIVATION_BYTES * (widths // tp + 4 * arch.hidden_size)
    moe = 0
    if e is not None:
        expert = e.expert_params // arch.hidden_size // tp + arch.hidden_size
        moe = tokens * ACTIVATION_BYTES * e.experts_per_token * expert
    return math.ceil(max(sampler, forward) + moe)


def overhead_bytes(
    runtime: Runtime, device: Device, context: int = 0, arch: ModelArch | None = None
) -> int:
    """Memory the runtime keeps from the KV cache besides the weights [bytes].

    llama.cpp style: a fixed framework overhead per GPU. vLLM style: the share of
    the memory the driver reports outside ``gpu_memory_utilization``, the
    activation peak of the profiling batch (``max_num_batched_tokens`` tokens in
    V1; V0 profiled a ``max_model_len``-sized batch), non-torch memory,
    all-reduce buffers per GPU under tensor parallelism, and, from the release
    that started counting it, the CUDA-graph pool.
    """
    if runtime.style == "fixed-overhead":
        return runtime.framework_overhead_bytes * device.count
    usable = usable_memory_bytes(device.memory_bytes, device.usable_memory_fraction) * device.count
    visible = math.floor(usable * runtime.visible_memory_fraction)
    unclaimed = usable - math.floor(visible * runtime.gpu_memory_utilization)
    activation = activation_bytes(runtime, device, arch, context)
    tp_extra = runtime.tp_extra_bytes_per_gpu if device.count > 1 else 0
    graphs = (
        runtime.cudagraph_bytes_per_gpu if since(runtime, runtime.cudagraph_counted_since) else 0
    )
    per_gpu = activation + runtime.non_torch_bytes + tp_extra + graphs
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


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to if to else n


def model_weights_bytes(
    arch: ModelArch | None, fmt: WeightFormat, total: int, runtime: Runtime | None = None
) -> int:
    """Weights in memory [bytes]: SPEC §2's product, with the format's exceptions.

    Formats that keep embeddings in 16 bits (AWQ, GPTQ, FP8) cost them apart;
    MXFP4 quantizes only the routed experts (gpt-oss's ``modules_to_not_convert``:
    attention, router, embeddings, head), the rest stays at 16 bits (in llama.cpp's
    GGUF files at the runtime's ``mxfp4_rest_bits``, Q8_0), and vLLM's
    MXFP4 kernel pads every expert matrix to its alignment (gpt-oss: 2880 x 2880
    to 3072 x 2944).
    """
    if arch is None:
        return weights_bytes(total, fmt.bits_per_weight)
    if fmt.experts_only and arch.experts is not None:
        e = arch.experts
        routed = e.moe_layers * e.num_experts * e.expert_params
        stored = routed
        if runtime is not None and runtime.mxfp4_hidden_align and arch.intermediate_size:
            h, i = arch.hidden_size, arch.intermediate_size
            hp = _round_up(h, runtime.mxfp4_hidden_align)
            ip = _round_up(i, runtime.mxfp4_intermediate_align)
            stored = math.ceil(routed * (hp * ip) / (h * i))
        rest = fmt.embedding_bits or 16.0
        if runtime is not None and runtime.mxfp4_rest_bits:
            rest = runtime.mxfp4_rest_bits
        return math.ceil((stored * fmt.bits_per_weight + (total - routed) * rest) / 8)
    return weights_bytes(total, fmt.bits_per_weight, arch.embedding_params, fmt.embedding_bits)


def step_overhead_s(
    device: Device, runtime: Runtime, constants: Constants, arch: ModelArch | None
) -> float:
    """Fixed time of one decode step [s].

    A cost per layer (kernel launches, synchronisation), a cost per MoE layer
    (routing and the expert dispatch: fitted on MoE decode measurements), the
    older per-routed-expert term (0 in the catalog since the MoE refit), and two
    all-reduces per layer under tensor parallelism.
    """
    overhead = pass_overhead_s(device, constants, arch, runtime=runtime)
    if device.count > 1 and runtime.multi_gpu == "tensor-parallel" and device.interconnect:
        layers = arch.num_layers if arch is not None else DEFAULT_LAYERS
        overhead += 2 * layers * constants.allreduce_latency_s[device.interconnect]
    return overhead


def platform_of(device: Device) -> str:
    """The device's calibration platform: its vendor, or ``cpu`` for a host's system memory."""
    return "cpu" if device.memory_kind == "system" else device.platform


def backend_of(device: Device, runtime: Runtime | None) -> str | None:
    """The runtime's backend on this device where it is not the platform's first.

    ``vulkan`` for llama.cpp on an RDNA GPU (by the device's generation); None
    where the runtime runs the platform's first backend.
    """
    if runtime is None or platform_of(device) == "cpu":
        return None
    return dict(runtime.backends).get(device.generation)


def decode_key(device: Device, runtime: Runtime | None = None) -> str:
    """The calibration key of a step's bandwidth share and fixed costs.

    The platform, with the runtime's backend appended where it runs one other
    than the platform's first (``amd_vulkan``).
    """
    backend = backend_of(device, runtime)
    return f"{platform_of(device)}_{backend}" if backend else platform_of(device)


def pass_overhead_s(
    device: Device,
    constants: Constants,
    arch: ModelArch | None,
    moe_layer_s: float | None = None,
    runtime: Runtime | None = None,
) -> float:
    """Fixed time of one forward pass on one device, all-reduces aside [s].

    A cost per layer and, for MoE, per MoE layer and per routed expert
    (:func:`step_overhead_s`). ``moe_layer_s`` replaces the platform's
    per-MoE-layer time (fitted on llama.cpp) for a runtime with a figure of its own.
    """
    key = decode_key(device, runtime)
    layers = arch.num_layers if arch is not None else DEFAULT_LAYERS
    overhead = layers * constants.layer_overhead_s[key]
    if arch is not None and arch.experts is not None:
        e = arch.experts
        per_layer = constants.moe_layer_overhead_s.get(key, 0.0)
        overhead += e.moe_layers * (per_layer if moe_layer_s is None else moe_layer_s)
        overhead += e.moe_layers * e.experts_per_token * constants.moe_expert_overhead_s
    return overhead


def _step_model(
    device: Device,
    runtime: Runtime,
    fmt: WeightFormat,
    constants: Constants,
    arch: ModelArch | None,
    active: int,
    weights: int,
    kv_per_token_avg: float,
    state_per_stream: float,
) -> StepModel | None:
    if device.bandwidth_bytes_per_s is None:
        return None
    platform = platform_of(device)
    flops = peak_flops(device, runtime, fmt)
    bandwidth = device.bandwidth_bytes_per_s * parallel(device, runtime)
    experts = arch.experts if arch is not None else None
    total = arch.total_params if arch is not None else active
    expert_bpp = fmt.bits_per_weight / 8 if fmt.experts_only else None
    dense, expert = split_weight_bytes(weights, total, active, experts, expert_bpp)
    return StepModel(
        dense_bytes=dense,
        expert_bytes=expert,
        experts=experts,
        kv_bytes_per_token=kv_per_token_avg,
        bandwidth_bytes_per_s=constants.bandwidth_efficiency[decode_key(device, runtime)]
        * bandwidth,
        overhead_s=step_overhead_s(device, runtime, constants, arch),
        compute_per_seq_s=2 * active / (constants.decode_compute_efficiency * flops)
        if flops
        else 0.0,
        state_bytes_per_stream=state_per_stream,
        metal=metal_kernels(runtime, fmt, arch.hidden_size, platform) if arch else NO_METAL,
        pair_reads_below=pair_reads_below(runtime, platform, experts is not None),
    )


@dataclass(frozen=True, slots=True)
class _Memory:
    weights: int
    per_token: int
    per_request: int
    state: int
    basis: KvBasis
    pool: VllmPool | None = None


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
    weights = model_weights_bytes(arch, fmt, total, runtime)
    if arch is None:
        per_token = kv_bytes_per_token_heuristic(total, constants.kv_heuristic_mib_per_billion)
        return _Memory(weights, per_token, per_token * context, 0, "heuristic")
    repl = kv_replication(device, runtime, arch)
    per_token = kv_bytes_per_token(arch.attention, kv_bytes_per_element) * repl
    if runtime.style == "memory-utilization":
        gpus = parallel(device, runtime)
        pool = vllm_pool(
            arch,
            kv_bytes_per_element,
            context,
            batched_tokens(runtime, device),
            gpus,
            runtime.block_tokens,
        )
        state = vllm_state_bytes_per_request(arch)
        return _Memory(weights, per_token, pool.request_bytes() * gpus, state, "exact", pool)
    per_request = llama_cpp_request_bytes(arch, kv_bytes_per_element, context, runtime.n_ubatch)
    state = state_bytes_per_request(arch, 4)
    return _Memory(weights, per_token, per_request * repl, state * repl, "exact")


def _pool_counts(mem: _Memory, budget: int, context: int, gpus: int) -> tuple[int, int, int]:
    """(slots, KV tokens as the runtime reports them, vLLM's pages per GPU) for this budget."""
    if mem.pool is not None:
        per_gpu = max(0, budget) // gpus
        blocks = mem.pool.blocks(per_gpu)
        return blocks // mem.pool.pages_per_request, mem.pool.reported_tokens(per_gpu), blocks
    tokens = max(0, math.floor(budget / (mem.per_request / context)))
    return slot_count(budget, mem.per_request), tokens, 0


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
    overhead = overhead_bytes(runtime, device, context, arch)
    budget = usable - mem.weights - overhead
    n_slots, capacity_tokens, pool_pages = _pool_counts(
        mem, budget, context, parallel(device, runtime)
    )
    # The step reads what a stream holds: its KV up to the windows, and its state.
    held = cache_bytes_per_request(arch, kv_bytes_per_element, 0, context) if arch else 0
    held = held * kv_replication(device, runtime, arch) if arch else mem.per_request
    per_token_avg = held / context
    streamed = active - (arch.lookup_only_params if arch is not None else 0)
    step = _step_model(
        device, runtime, fmt, constants, arch, streamed, mem.weights, per_token_avg, mem.state
    )
    per_stream_kv = context / 2  # a stream is, on average, halfway through its context
    flops = peak_flops(device, runtime, fmt)
    if step is not None:
        bw_conc: int | None = bandwidth_concurrency(
            step, per_stream_kv, constants.min_stream_tokens_per_s
        )
        dips = slow_batches(step, per_stream_kv, constants.min_stream_tokens_per_s, bw_conc or 0)
        binding: Ceiling | None = binding_ceiling(n_slots, bw_conc or 0, step, per_stream_kv)
        effective = min(n_slots, max(bw_conc or 0, 1))
    else:
        bw_conc, binding, effective, dips = None, None, n_slots, ()
    band = error_band(
        device.memory_kind,
        total,
        device.count,
        arch is not None and arch.is_moe,
        constants.kv_heuristic_mib_per_billion if mem.basis == "heuristic" else None,
        flops is not None,
        step is not None,
        n_slots,
        device.platform,
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
        kv_capacity_tokens=capacity_tokens,
        kv_basis=mem.basis,
        context_tokens=context,
        total_params=total,
        active_params=active,
        step_fixed_s=(
            (step.weight_bytes_at(max(1, effective)) + step.state_bytes_per_stream)
            / step.bandwidth_bytes_per_s
            + step.overhead_s
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
        bandwidth_slow_batches=dips,
        effective_concurrency=effective,
        binding_ceiling=binding,
        error_band_pct=band.pct,
        error_band_reason=band.reason,
        kv_state_bytes_per_request=mem.state,
        kv_layout=arch.layout() if arch is not None else "",
        runtime_version=runtime.version,
        kv_block_tokens=mem.pool.block if mem.pool is not None else 0,
        kv_pool_pages=pool_pages,
        kv_pool=mem.pool,
    )
