"""Plain input records for the capacity engine (built by the catalog layer)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# Layers assumed for a model known only by its size: the 7-8B shape.
DEFAULT_LAYERS = 32

MemoryKind = Literal["discrete", "unified", "system"]
Platform = Literal["nvidia", "amd", "apple", "intel", "cpu"]


@dataclass(frozen=True, slots=True)
class Device:
    """One GPU, SoC or CPU host, or ``count`` identical GPUs working as one rig."""

    name: str
    memory_kind: MemoryKind
    platform: Platform
    memory_bytes: int
    bandwidth_bytes_per_s: int | None
    bf16_flops_per_s: int | None = None
    fp8_flops_per_s: int | None = None
    usable_memory_fraction: float | None = None
    count: int = 1
    interconnect: Literal["pcie", "nvlink", "infinity-fabric"] | None = None
    interconnect_bandwidth_bytes_per_s: int | None = None
    # Architecture generation ("hopper", "ampere", ...): a calibration constant
    # may differ by generation where the measurements say so.
    generation: str = ""


@dataclass(frozen=True, slots=True)
class Runtime:
    """How the serving framework splits memory and spreads a model over GPUs."""

    name: str
    style: Literal["fixed-overhead", "memory-utilization"]
    multi_gpu: Literal["tensor-parallel", "layer-split"]
    framework_overhead_bytes: int = 0
    gpu_memory_utilization: float = 1.0
    non_torch_bytes: int = 0
    max_num_batched_tokens: int = 0
    large_gpu_memory_bytes: int = 0
    large_gpu_max_num_batched_tokens: int = 0
    activation_bytes_per_batched_token: float = 0.0
    tp_extra_bytes_per_gpu: int = 0
    # How it schedules (engine/serving): vLLM pages KV in blocks and batches up to
    # max_num_seqs sequences and max_num_batched_tokens tokens a step; llama.cpp
    # runs n_batch tokens a step in passes of n_ubatch.
    scheduler: Literal["vllm", "llama.cpp"] = "llama.cpp"
    max_num_seqs: int = 0
    large_gpu_max_num_seqs: int = 0
    small_defaults_name: str = ""
    n_batch: int = 2048
    # The release this profile describes, and the releases where vLLM's memory
    # budget changed: V1 profiles a max_num_batched_tokens batch (V0 a
    # max_model_len one); the CUDA-graph pool is subtracted from the KV budget
    # from ``cudagraph_counted_since`` on. Empty: not applicable.
    version: str = ""
    v1_since: str = ""
    cudagraph_counted_since: str = ""
    cudagraph_bytes_per_gpu: int = 0
    # From this release the activation peak is the larger of the sampler's (per
    # logit of max_num_seqs x vocabulary) and the forward pass's, plus the fused-MoE
    # workspace; before it, one figure per batched token. Empty: always that figure.
    sampler_peak_since: str = ""
    sampler_bytes_per_logit: float = 0.0
    # Share of the nominal memory the driver reports as the device's total.
    visible_memory_fraction: float = 1.0
    # KV layout: vLLM's block size, llama.cpp's physical batch (the SWA cache
    # keeps window + n_ubatch cells, and prompts run n_ubatch tokens a pass).
    block_tokens: int = 16
    n_ubatch: int = 512
    # vLLM's MXFP4 MoE kernel (Marlin) pads each expert to these multiples of the
    # hidden and intermediate sizes; 0: no padding.
    mxfp4_hidden_align: int = 0
    mxfp4_intermediate_align: int = 0
    # Bits of an MXFP4 model's other weights in this runtime's files; 0: 16 (BF16).
    mxfp4_rest_bits: float = 0.0
    # MoE layers over several GPUs: experts dealt out whole (expert parallel, an
    # all-to-all each way per layer) or each expert split across the GPUs like a
    # dense MLP (tensor parallel, one all-reduce per layer).
    expert_parallel: bool = False
    # Per platform: below this many tokens in a forward pass the MoE mat-vec
    # kernel streams one expert per (token, chosen expert) pair instead of each
    # distinct expert once (llama.cpp's Metal backend: 32). Absent: never.
    expert_pair_reads_below: tuple[tuple[str, int], ...] = ()
    # llama.cpp on Metal: tokens one weight read serves in the small-batch mat-vec
    # kernel, by tokens of the pass (index 0 unused; empty: no such kernel); the
    # row multiple it needs; the tokens a matrix-matrix tile computes above it.
    metal_ext_columns: tuple[int, ...] = ()
    metal_ext_row_multiple: int = 0
    metal_tile_tokens: int = 0
    # Per device generation, the backend the runtime runs there when it is not the
    # platform's first (llama.cpp on RDNA GPUs: Vulkan instead of ROCm); its decode
    # constants are the ``<platform>_<backend>`` ones. Absent: the first backend.
    backends: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class WeightFormat:
    """A quantization as the engine costs it."""

    name: str
    bits_per_weight: float
    embedding_bits: float | None = None
    fp8_compute: bool = False
    # MXFP4 checkpoints quantize only the routed experts; every other weight
    # stays at ``embedding_bits`` (16 when unset).
    experts_only: bool = False
    # llama.cpp on Metal: fewest tokens of a pass its small-batch mat-vec kernel
    # takes for this format (0: none, every token's column reads the weights).
    metal_ext_min_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Constants:
    """Calibration constants; each one's value and source live in catalog/calibration.yaml."""

    kv_heuristic_mib_per_billion: float
    bandwidth_efficiency: dict[str, float]
    layer_overhead_s: dict[str, float]
    moe_expert_overhead_s: float
    allreduce_latency_s: dict[str, float]
    prefill_compute_efficiency: float
    decode_compute_efficiency: float
    min_stream_tokens_per_s: float
    serving_compute_efficiency: dict[str, float] = field(default_factory=dict)
    serving_bandwidth_factor: dict[str, float] = field(default_factory=dict)
    step_overhead_s: dict[str, float] = field(default_factory=dict)
    seq_overhead_s: dict[str, float] = field(default_factory=dict)
    request_overhead_s: dict[str, float] = field(default_factory=dict)
    request_latency_s: dict[str, float] = field(default_factory=dict)
    # Fixed cost of one MoE layer's routing and expert dispatch per decode step [s].
    moe_layer_overhead_s: dict[str, float] = field(default_factory=dict)
    # Share of dense peak FLOP/s the grouped expert GEMMs of a serving step reach, by scheduler.
    serving_moe_efficiency: dict[str, float] = field(default_factory=dict)
    # A serving pass's fixed time per MoE layer, by scheduler, where its fused MoE kernel
    # differs from llama-bench's (moe_layer_overhead_s is per platform, from llama.cpp) [s].
    serving_moe_layer_overhead_s: dict[str, float] = field(default_factory=dict)
    # What a MoE layer adds to a step too large for a captured CUDA graph, by scheduler [s].
    serving_moe_eager_layer_s: dict[str, float] = field(default_factory=dict)
