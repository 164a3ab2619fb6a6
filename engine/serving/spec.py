"""A costed config as a model server: its scheduler's limits and its step cost.

The KV pool, weights and bandwidth come from the capacity result; the
scheduler's limits from the runtime profile (vLLM's ``max_num_seqs`` and
``max_num_batched_tokens`` defaults by device memory, llama.cpp's slots of the
full context); the step cost from the architecture and the calibration.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

from backpressure.engine.arch import ModelArch
from backpressure.engine.capacity import (
    ACTIVATION_BYTES,
    batched_seqs,
    batched_tokens,
    decode_key,
    parallel,
    pass_overhead_s,
    peak_flops,
    platform_of,
)
from backpressure.engine.ceilings import split_weight_bytes
from backpressure.engine.inputs import DEFAULT_LAYERS, Constants, Device, Runtime, WeightFormat
from backpressure.engine.kernels import MetalKernels, metal_kernels, pair_reads_below
from backpressure.engine.results import CapacityResult
from backpressure.engine.serving.model import Policy, Scheduler, Server, StepCost

ASYNC_SCHEDULING = (0, 14)  # first vLLM release that overlaps host and device: host_overlaps
GRAPH_MAX_TOKENS = 512  # vLLM's largest default CUDA-graph capture size (vllm/config/vllm.py)


def batch_defaults(runtime: Runtime, device: Device) -> tuple[int, int]:
    """VLLM's ``(max_num_seqs, max_num_batched_tokens)`` for this device.

    The OpenAI server's defaults (:func:`~backpressure.engine.capacity.large_defaults`).
    """
    return batched_seqs(runtime, device), batched_tokens(runtime, device)


def scheduler(
    runtime: Runtime,
    device: Device,
    cap: CapacityResult,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    request_tokens: int = 0,
) -> Scheduler:
    """The scheduler's limits for a costed config.

    vLLM pages the whole KV budget in blocks and admits by the blocks a
    request holds; llama.cpp splits it into ``cap.slots`` slots of the full
    context each. Explicit ``max_num_seqs`` / ``max_num_batched_tokens`` replace
    the defaults. ``request_tokens``: the KV tokens a request of the profile
    ends with, for which a hybrid pool is converted (:func:`pool_blocks`).
    """
    if runtime.scheduler == "vllm":
        seqs, tokens = batch_defaults(runtime, device)
        tokens = max_num_batched_tokens or tokens
        seqs = min(max_num_seqs or seqs, tokens)
        block = cap.kv_block_tokens or runtime.block_tokens
        blocks = pool_blocks(cap, max(cap.kv_capacity_tokens, 0) // block, request_tokens)
        return Scheduler(Policy.VLLM, int(blocks), block, seqs, tokens, tokens, cap.context_tokens)
    slots = max(max_num_seqs or cap.slots, 0) if max_num_seqs is None else max_num_seqs
    batch = max_num_batched_tokens or runtime.n_batch
    return Scheduler(
        Policy.LLAMA_CPP, 0, 1, slots, batch, min(runtime.n_ubatch, batch), cap.context_tokens
    )


def pool_blocks(cap: CapacityResult, reported_blocks: int, request_tokens: int) -> int:
    """VLLM's pool as the blocks the serving loop admits by, for requests of ``request_tokens``.

    The loop charges a request one block per ``block`` tokens, as a model of
    full-attention layers only costs. vLLM's hybrid manager charges a
    sliding-window or chunked layer group only the pages inside its window and
    a state group one page (:meth:`~backpressure.engine.kv_pool.VllmPool.held_pages`),
    and its "GPU KV cache size" line (``reported_blocks`` blocks of it) counts
    the pool as if every group grew with length. So the pool's pages are
    converted at the profile's length: as many such requests fit as in vLLM.
    Without a profile or a pool, ``reported_blocks``.
    """
    pool = cap.kv_pool
    if pool is None or request_tokens <= 0 or len(pool.kinds) < 2:
        return reported_blocks
    return pool.full_equivalent_blocks(reported_blocks * pool.groups, request_tokens)


def all_reduce(
    device: Device,
    constants: Constants,
    gpus: int,
    layers: int,
    hidden: int,
    per_layer: int = 2,
) -> tuple[float, float]:
    """Latency [s] and link time per token [s] of ``per_layer`` all-reduces in ``layers`` layers.

    A ring all-reduce of one token's ``hidden`` activations moves
    ``2 (g - 1) / g`` of them over each GPU's link.
    """
    if gpus <= 1 or not device.interconnect or layers <= 0:
        return 0.0, 0.0
    latency = per_layer * layers * constants.allreduce_latency_s[device.interconnect]
    link = device.interconnect_bandwidth_bytes_per_s
    if not link:
        return latency, 0.0
    ring = 2 * (gpus - 1) / gpus
    return latency, per_layer * layers * hidden * ACTIVATION_BYTES * ring / link


def remote_gpus(gpus: int, experts_per_token: int) -> float:
    """Expected GPUs other than its own that hold at least one of a token's ``k`` experts.

    With the experts dealt evenly over ``g`` GPUs and routing uniform, each pick
    lands on a given other GPU with probability ``1/g``, so that GPU is missed by
    all ``k`` with ``(1 - 1/g)^k``: ``(g - 1)(1 - (1 - 1/g)^k)`` (repeated
    multiplication, no ``pow``: the same bits everywhere).

    >>> remote_gpus(2, 1)
    0.5
    >>> remote_gpus(8, 1) < remote_gpus(8, 8) < 7
    True
    """
    miss = 1.0
    for _ in range(experts_per_token):
        miss = miss * (1.0 - 1.0 / gpus)
    return (gpus - 1) * (1.0 - miss)


def expert_dispatch(
    device: Device,
    constants: Constants,
    gpus: int,
    moe_layers: int,
    hidden: int,
    experts_per_token: int,
) -> tuple[float, float]:
    """Latency [s] and link time per token [s] of the expert-parallel all-to-alls.

    Every MoE layer sends each token's ``hidden`` activations to the other GPUs
    that hold one of its experts (dispatch) and brings the results back
    (combine): two all-to-alls, each moving :func:`remote_gpus` copies per token
    over the link, each as slow to start as a small all-reduce
    (``allreduce_latency_s_<link>``).
    """
    if gpus <= 1 or not device.interconnect or moe_layers <= 0:
        return 0.0, 0.0
    latency = 2 * moe_layers * constants.allreduce_latency_s[device.interconnect]
    link = device.interconnect_bandwidth_bytes_per_s
    if not link:
        return latency, 0.0
    copies = remote_gpus(gpus, experts_per_token)
    return latency, 2 * moe_layers * hidden * ACTIVATION_BYTES * copies / link


def compute_efficiency(constants: Constants, scheduler: str, generation: str) -> float:
    """Share of dense peak a step's matrix products reach on this scheduler and generation.

    A generation's own figure where one was fitted (``vllm_hopper``), else the
    scheduler's, else the prefill figure.
    """
    by_scheduler = constants.serving_compute_efficiency
    return by_scheduler.get(
        f"{scheduler}_{generation}",
        by_scheduler.get(scheduler, constants.prefill_compute_efficiency),
    )


def bandwidth_factor(constants: Constants, scheduler: str, generation: str) -> float:
    """Share of llama-bench's decode bandwidth a step of this scheduler reaches on this generation.

    A generation's own figure where one was fitted (``vllm_ampere``), else the
    scheduler's, else 1.
    """
    by_scheduler = constants.serving_bandwidth_factor
    return by_scheduler.get(f"{scheduler}_{generation}", by_scheduler.get(scheduler, 1.0))


def moe_efficiency(constants: Constants, scheduler: str, split: bool) -> float | None:
    """Share of dense peak the routed-expert GEMMs reach; None: priced as dense GEMMs.

    Split across tensor-parallel GPUs (``split``), each GPU multiplies a slice
    of every touched expert's width, narrower GEMMs than on one GPU; the
    scheduler's ``_tp`` figure where one was fitted, else its one-GPU figure.
    """
    by_scheduler = constants.serving_moe_efficiency
    own = by_scheduler.get(scheduler)
    return by_scheduler.get(f"{scheduler}_tp", own) if split else own


def step_cost(
    device: Device,
    runtime: Runtime,
    fmt: WeightFormat,
    constants: Constants,
    arch: ModelArch | None,
    cap: CapacityResult,
) -> StepCost | None:
    """The step model of a costed config; None without a bandwidth or FLOPS figure."""
    flops = peak_flops(device, runtime, fmt)
    if device.bandwidth_bytes_per_s is None or flops is None:
        return None
    platform = platform_of(device)
    gpus = parallel(device, runtime)
    lookup = arch.lookup_only_params if arch is not None else 0
    streamed = cap.active_params - lookup
    layers = arch.num_layers if arch is not None else DEFAULT_LAYERS
    experts = arch.experts if arch is not None else None
    # MXFP4 quantizes only the routed experts: they cost their own bits, the rest 16
    expert_bpp = fmt.bits_per_weight / 8 if fmt.experts_only else None
    dense_bytes, one_expert = split_weight_bytes(
        cap.weights_bytes, cap.total_params, streamed, experts, expert_bpp
    )
    expert_bytes = experts.moe_layers * one_expert if experts is not None else 0.0
    full_bytes = float(cap.kv_bytes_per_token)
    window_bytes, window = 0.0, 0
    heads, head_dim = 32, 128  # the 7-8B shape, for a model known only by size
    attention_layers = full_layers = layers
    if arch is not None:
        a = arch.attention
        heads, head_dim = a.num_heads, a.head_dim
        attention_layers = len(a.window_per_layer) or 1
        per_layer = cap.kv_bytes_per_token / attention_layers
        windowed = [w for w in a.window_per_layer if w]
        full_layers = attention_layers - len(windowed)
        full_bytes = per_layer * full_layers
        window_bytes = per_layer * len(windowed)
        window = max(windowed, default=0)
    overhead = pass_overhead_s(
        device,
        constants,
        arch,
        constants.serving_moe_layer_overhead_s.get(runtime.scheduler),
        runtime,
    )
    hidden = arch.hidden_size if arch is not None else 4096
    moe_layers = experts.moe_layers if experts is not None else 0
    dispatch, dispatch_token = 0.0, 0.0
    split = False  # a MoE model's experts split across tensor-parallel GPUs
    if experts is not None and gpus > 1 and runtime.expert_parallel:
        # Experts dealt out whole: each MoE layer's all-reduce gives way to a
        # dispatch and a combine.
        allreduce, per_token = all_reduce(device, constants, gpus, layers - moe_layers, hidden)
        attn_reduce, attn_token = all_reduce(device, constants, gpus, moe_layers, hidden, 1)
        allreduce, per_token = allreduce + attn_reduce, per_token + attn_token
        dispatch, dispatch_token = expert_dispatch(
            device, constants, gpus, moe_layers, hidden, experts.experts_per_token
        )
    else:
        # Tensor parallel (vLLM's default for MoE layers too): every expert is
        # split across the GPUs like a dense MLP, one all-reduce after it.
        allreduce, per_token = all_reduce(device, constants, gpus, layers, hidden)
        split = experts is not None and gpus > 1
    compute_eff = compute_efficiency(constants, runtime.scheduler, device.generation)
    moe_eff = moe_efficiency(constants, runtime.scheduler, split)
    graphs, eager = 0, 0.0
    if runtime.scheduler == "vllm":
        graphs = graph_tokens(*batch_defaults(runtime, device))
        eager = moe_layers * eager_layer_s(constants, runtime.scheduler, gpus)
    routed_flops = 0.0
    if experts is not None and moe_eff is not None:
        routed_flops = 2.0 * experts.moe_layers * experts.experts_per_token * experts.expert_params
    return StepCost(
        weight_bytes=dense_bytes,
        expert_bytes=expert_bytes,
        num_experts=experts.num_experts if experts is not None else 0,
        experts_per_token=experts.experts_per_token if experts is not None else 0,
        kv_read_bytes_per_token=full_bytes,
        state_read_bytes_per_seq=float(cap.kv_state_bytes_per_request),
        window_read_bytes_per_token=window_bytes,
        window=window,
        bandwidth_bytes_per_s=constants.bandwidth_efficiency[decode_key(device, runtime)]
        * bandwidth_factor(constants, runtime.scheduler, device.generation)
        * device.bandwidth_bytes_per_s
        * gpus,
        flops_per_token=2.0 * streamed - routed_flops,
        attn_flops_per_pair=4.0 * full_layers * heads * head_dim,
        window_attn_flops_per_pair=4.0 * (attention_layers - full_layers) * heads * head_dim,
        flops_per_s=compute_eff * flops,
        pass_overhead_s=overhead,
        step_overhead_s=constants.step_overhead_s.get(runtime.scheduler, 0.0),
        allreduce_s=allreduce,
        allreduce_s_per_token=per_token,
        seq_overhead_s=constants.seq_overhead_s.get(runtime.scheduler, 0.0),
        request_overhead_s=constants.request_overhead_s.get(runtime.scheduler, 0.0),
        request_latency_s=constants.request_latency_s.get(runtime.scheduler, 0.0),
        expert_flops_per_token=routed_flops,
        # unused without routed experts: the dense rate there, so a refit of the MoE
        # rate leaves dense servers (and their arrival seeds) as they were
        moe_flops_per_s=(moe_eff if moe_eff is not None and routed_flops > 0.0 else compute_eff)
        * flops,
        dispatch_s=dispatch,
        dispatch_s_per_token=dispatch_token,
        host_overlaps=host_overlaps(runtime.scheduler, runtime.version),
        expert_pair_below=pair_reads_below(runtime, platform, experts is not None),
        graph_tokens=graphs if eager > 0.0 else 0,
        eager_s=eager,
        **_metal_fields(metal_kernels(runtime, fmt, hidden, platform)),
    )


def _metal_fields(kernels: MetalKernels) -> dict[str, Any]:
    """The :class:`StepCost` fields of the Metal kernels; none where there are none."""
    if not kernels.columns:
        return {}
    return {
        "mat_vec_columns": kernels.columns,
        "ext_from": kernels.ext_from,
        "tile_tokens": kernels.tile_tokens,
    }


def eager_layer_s(constants: Constants, scheduler: str, gpus: int) -> float:
    """What one MoE layer adds to a step run without a CUDA graph [s].

    On several GPUs every eager launch of a collective waits for the slowest
    host, so they have a figure of their own (``<scheduler>_multi_gpu``) where
    one was fitted.
    """
    by_scheduler = constants.serving_moe_eager_layer_s
    own = by_scheduler.get(scheduler, 0.0)
    return by_scheduler.get(f"{scheduler}_multi_gpu", own) if gpus > 1 else own


def graph_tokens(max_num_seqs: int, max_num_batched_tokens: int) -> int:
    """Most tokens of a vLLM step that run as a captured CUDA graph.

    vLLM captures graphs for batch sizes up to ``min(2 max_num_seqs, 512)``
    (``VllmConfig._set_cudagraph_sizes``), none above the step's token budget;
    a step of more tokens runs without one.

    >>> graph_tokens(256, 8192), graph_tokens(64, 8192), graph_tokens(256, 256)
    (512, 128, 256)
    """
    return min(2 * max_num_seqs, GRAPH_MAX_TOKENS, max_num_batched_tokens)


def host_overlaps(scheduler: str, version: str) -> bool:
    """Whether the host prepares the next step while the device runs this one.

    llama.cpp's slots do. vLLM does from the release that turned its async
    scheduling on by default (pull request 27614, on by 8 January 2026; opt-in
    with ``--async-scheduling`` since pull request 19970, June 2025): 0.14, the
    first release after that date (inferred, not read from release notes).
    Earlier releases (and a profile with no version) schedule a step, run it
    and take in its outputs before they schedule the next, so the host's time
    adds to the device's.

    >>> host_overlaps("vllm", "0.19.0"), host_overlaps("vllm", "0.10.1.1")
    (True, False)
    >>> host_overlaps("llama.cpp", "")
    True
    """
    if scheduler != "vllm":
        return True
    m = re.match(r"(\d+)\.(\d+)", version)
    return m is not None and (int(m[1]), int(m[2])) >= ASYNC_SCHEDULING


def requests_held(sched: Scheduler, prompt: int, output: int) -> int:
    """Requests of this profile the server can hold at once, whichever limit binds first.

    vLLM: ``max_num_seqs``, or the pool's blocks over the blocks a request holds
    when it finishes. llama.cpp: the slots.
    """
    if sched.policy is Policy.LLAMA_CPP:
        return sched.max_seqs
    per_request = math.ceil((prompt + output - 1) / sched.block_tokens)
    return min(sched.max_seqs, sched.kv_blocks // max(per_request, 1))


def server(
    device: Device,
    runtime: Runtime,
    fmt: WeightFormat,
    constants: Constants,
    arch: ModelArch | None,
    cap: CapacityResult,
    prompt: int,
    output: int,
    queue_depth_per_seq: float,
    max_wait_s: float,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
) -> Server | None:
    """The model server of a costed config, or None when it cannot be simulated.

    Its queue holds ``queue_depth_per_seq`` waiting requests per request it can
    run at once, and abandons a request that waited ``max_wait_s``.
    """
    cost = step_cost(device, runtime, fmt, constants, arch, cap)
    if cost is None or not cap.fits:
        return None
    sched = scheduler(
        runtime, device, cap, max_num_seqs, max_num_batched_tokens, prompt + output - 1
    )
    if cost.graph_tokens > 0:  # the launch's own limits, not the defaults
        cost = replace(cost, graph_tokens=graph_tokens(sched.max_seqs, sched.max_batched_tokens))
    held = requests_held(sched, prompt, output)
    if held < 1:
        return None
    depth = max(1, math.floor(queue_depth_per_seq * held))
    return Server(sched, cost, depth, max_wait_s)
