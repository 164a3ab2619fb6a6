"""Pydantic schema for the catalog: one YAML file per entity, filename = id.

Every numeric fact carries a source: each entity has a ``sources`` mapping from
field name to a URL or document, and validation fails if a numeric field that is
set has no entry there. Units are SI base units and are named in the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from backpressure.catalog.fields import (
    ID_PATTERN,
    Bool,
    EntityId,
    Float,
    Int,
    Name,
    Note,
    Source,
    Text,
)
from backpressure.catalog.hf_config import config_shape_problem
from pydantic import BaseModel, ConfigDict, Field, Strict, StringConstraints, model_validator

__all__ = ["ID_PATTERN", "Bool", "EntityId", "Float", "Int", "Name", "Note", "Source", "Text"]

TIB = 1024**4

# Sanity bounds: generous enough for any real part, tight enough to catch a
# unit slip (GB/s typed as B/s, or bytes typed as GB).
MIN_MEMORY_BYTES = 1024**3  # 1 GiB: "24" typed for 24 GiB is 24 bytes
MAX_MEMORY_BYTES = 16 * TIB
MIN_BANDWIDTH_BYTES_PER_S = 10 * 10**9  # 10 GB/s: "1008" typed for 1,008 GB/s
MAX_BANDWIDTH_BYTES_PER_S = 100 * 10**12
MIN_LINK_BYTES_PER_S = 10**9
MIN_FLOPS_PER_S = 10**11  # 0.1 TFLOP/s: "312" typed for 312 TFLOP/s
MAX_FLOPS_PER_S = 100 * 10**15
MAX_OVERHEAD_BYTES = TIB
MAX_BATCH_TOKENS = 2**24
MAX_PARAMS = 10**14
MAX_MS = 10**7  # latency budgets [ms]: under three hours
MAX_S = 86_400  # durations [s]: a simulated day


class Entity(BaseModel):
    """Common base: strict keys, frozen, a source for every numeric field."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: EntityId = Field(description="Stable identifier; equals the YAML file name.")
    name: Name = Field(description="Human-readable name shown on pages.")
    sources: dict[str, Source] = Field(
        default_factory=dict,
        description="Field name -> URL or document that states the value.",
    )
    notes: Note | None = Field(default=None, description="Free-text caveats.")

    @model_validator(mode="after")
    def _numbers_have_sources(self) -> Entity:
        for name, value in self:
            if name in ("sources", "id") or value is None or isinstance(value, bool):
                continue
            if isinstance(value, int | float) and name not in self.sources:
                raise ValueError(f"{name}: numeric fact has no entry in 'sources'")
        for key in self.sources:
            if key not in type(self).model_fields and key not in self._extra_source_keys():
                raise ValueError(f"sources: '{key}' names no field of this entry")
        return self

    def _extra_source_keys(self) -> frozenset[str]:
        return frozenset()


class Gpu(Entity):
    """One accelerator, Apple SoC or CPU host, as a single memory pool."""

    vendor: Literal["nvidia", "amd", "apple", "intel"] = Field(description="Chip vendor.")
    memory_kind: Literal["discrete", "unified", "system"] = Field(
        description="discrete: dedicated VRAM; unified: shared SoC memory; system: CPU RAM."
    )
    memory_bytes: Int = Field(
        ge=MIN_MEMORY_BYTES, le=MAX_MEMORY_BYTES, description="Installed memory [bytes]."
    )
    bandwidth_bytes_per_s: Int = Field(
        ge=MIN_BANDWIDTH_BYTES_PER_S,
        le=MAX_BANDWIDTH_BYTES_PER_S,
        description="Peak memory bandwidth [bytes/s].",
    )
    bf16_flops_per_s: Int | None = Field(
        default=None,
        ge=MIN_FLOPS_PER_S,
        le=MAX_FLOPS_PER_S,
        description="Dense (no sparsity) BF16/FP16 tensor throughput [FLOP/s].",
    )
    fp8_flops_per_s: Int | None = Field(
        default=None,
        ge=MIN_FLOPS_PER_S,
        le=MAX_FLOPS_PER_S,
        description="Dense (no sparsity) FP8 tensor throughput [FLOP/s], if the chip has FP8.",
    )
    usable_memory_fraction: Float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Share of memory_bytes a model may use (unified and system memory only).",
    )

    @model_validator(mode="after")
    def _fraction_matches_kind(self) -> Gpu:
        if self.memory_kind == "discrete" and self.usable_memory_fraction is not None:
            raise ValueError("usable_memory_fraction: only unified or system memory has one")
        if self.memory_kind != "discrete" and self.usable_memory_fraction is None:
            raise ValueError(f"usable_memory_fraction: required for {self.memory_kind} memory")
        return self


class Rig(Entity):
    """Several identical GPUs serving one model with tensor parallelism."""

    gpu: EntityId = Field(description="Id of the GPU the rig is built from.")
    count: Int = Field(ge=2, le=64, description="Number of GPUs (tensor-parallel degree).")
    interconnect: Literal["pcie", "nvlink", "infinity-fabric"] = Field(
        description="GPU-to-GPU link used for the all-reduce."
    )
    interconnect_bandwidth_bytes_per_s: Int = Field(
        ge=MIN_LINK_BYTES_PER_S,
        le=MAX_BANDWIDTH_BYTES_PER_S,
        description="Per-GPU unidirectional link bandwidth [bytes/s].",
    )


class Quant(Entity):
    """A weight format, costed at its effective bits per weight."""

    format: Literal["gguf", "float", "awq", "gptq", "fp8", "mxfp4"] = Field(
        description="Family of the format."
    )
    bits_per_weight: Float = Field(
        ge=1, le=32, description="Effective storage cost including scales and minimums [bits]."
    )
    embedding_bits_per_weight: Float | None = Field(
        default=None,
        ge=1,
        le=32,
        description=(
            "Bits the token embedding and output head are stored at when the format "
            "leaves them unquantized (AWQ, GPTQ, FP8 checkpoints); unset = bits_per_weight."
        ),
    )
    runtimes: tuple[EntityId, ...] = Field(
        min_length=1,
        description="Runtime ids that serve this format, in order of preference.",
    )


class KvDtype(Entity):
    """A KV-cache element type. ``auto`` means the model's activation dtype."""

    bytes_per_element: Float | None = Field(
        default=None,
        ge=0.0625,
        le=4,
        description="Storage per cached element including block scales [bytes]; None for auto.",
    )
    runtimes: tuple[EntityId, ...] = Field(min_length=1, description="Runtimes that offer it.")


class Runtime(Entity):
    """How a serving framework carves device memory into weights, overhead and KV."""

    style: Literal["fixed-overhead", "memory-utilization"] = Field(
        description=(
            "fixed-overhead: KV budget = usable memory - weights - framework overhead "
            "(llama.cpp style); memory-utilization: budget = utilization x memory - weights "
            "- activation peak - non-torch memory (vLLM style)."
        )
    )
    multi_gpu: Literal["tensor-parallel", "layer-split"] = Field(
        default="layer-split",
        description=(
            "How several GPUs share a model: tensor-parallel (every GPU works on every "
            "layer: bandwidth adds up) or layer-split (layers in sequence: memory adds up, "
            "one stream still runs at one GPU's bandwidth)."
        ),
    )
    memory_kinds: tuple[Literal["discrete", "unified", "system"], ...] = Field(
        default=("discrete", "unified", "system"),
        description="Memory kinds (device classes) the runtime serves on.",
    )
    framework_overhead_bytes: Int | None = Field(
        default=None,
        ge=0,
        le=MAX_OVERHEAD_BYTES,
        description="Fixed overhead: CUDA context, compute buffers [bytes] (fixed-overhead).",
    )
    gpu_memory_utilization: Float | None = Field(
        default=None, gt=0, le=1, description="Default share of device memory the server claims."
    )
    non_torch_bytes: Int | None = Field(
        default=None,
        ge=0,
        le=MAX_OVERHEAD_BYTES,
        description="Memory outside the framework allocator: NCCL, cuBLAS workspaces [bytes].",
    )
    max_num_batched_tokens: Int | None = Field(
        default=None,
        gt=0,
        le=MAX_BATCH_TOKENS,
        description="Tokens in the profiling batch that sets the activation peak.",
    )
    large_gpu_memory_bytes: Int | None = Field(
        default=None,
        gt=0,
        le=MAX_MEMORY_BYTES,
        description="GPUs with at least this much memory get the larger default token budget.",
    )
    large_gpu_max_num_batched_tokens: Int | None = Field(
        default=None,
        gt=0,
        le=MAX_BATCH_TOKENS,
        description="Profiling-batch tokens on GPUs at or above large_gpu_memory_bytes.",
    )
    activation_bytes_per_batched_token: Float | None = Field(
        default=None,
        gt=0,
        le=2**24,
        description="Profiled activation peak per token of the profiling batch [bytes].",
    )
    tp_extra_bytes_per_gpu: Int | None = Field(
        default=None,
        ge=0,
        le=MAX_OVERHEAD_BYTES,
        description="Extra per-GPU memory under tensor parallelism: all-reduce buffers [bytes].",
    )

    @model_validator(mode="after")
    def _style_fields(self) -> Runtime:
        need = {
            "fixed-overhead": ("framework_overhead_bytes",),
            "memory-utilization": (
                "gpu_memory_utilization",
                "non_torch_bytes",
                "max_num_batched_tokens",
                "activation_bytes_per_batched_token",
            ),
        }[self.style]
        for field in need:
            if getattr(self, field) is None:
                raise ValueError(f"{field}: required for runtime style '{self.style}'")
        return self


class Model(Entity):
    """An open-weight model; its architecture is parsed from the verbatim ``config``."""

    hf_repo: Annotated[
        str, Strict(), StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+$")
    ] = Field(description="Hugging Face repository id the config.json comes from.")
    family: Name = Field(description="Model family shown on hub pages, e.g. 'Llama 3.1'.")
    published_params: Int | None = Field(
        default=None,
        gt=0,
        le=MAX_PARAMS,
        description="Total parameter count as published [parameters].",
    )
    published_active_params: Int | None = Field(
        default=None,
        gt=0,
        le=MAX_PARAMS,
        description="Active parameters per token as published (MoE).",
    )
    config: dict[str, Any] = Field(
        description="The model's config.json (verbatim, or the architecture keys of it)."
    )

    def _extra_source_keys(self) -> frozenset[str]:
        return frozenset({"config"})

    @model_validator(mode="after")
    def _config_is_sourced(self) -> Model:
        problem = config_shape_problem(self.config)
        if problem:
            raise ValueError(f"config: {problem}")
        if "config" not in self.sources:
            raise ValueError("sources: 'config' (the config.json URL) is required")
        if (
            self.published_params is not None
            and self.published_active_params is not None
            and self.published_active_params > self.published_params
        ):
            raise ValueError("published_active_params: more active than total parameters")
        return self


# Calibration constants by name (or name prefix, ending in "_"): (low, high, low
# included). Bounds catch a unit slip (an efficiency of 92.3 for 0.923, a latency
# in microseconds for seconds); a constant not listed here must be finite and >= 0.
CALIBRATION_RANGES: dict[str, tuple[float, float, bool]] = {
    "kv_heuristic_mib_per_billion": (0.0, 1.0, False),
    "bandwidth_efficiency_": (0.0, 1.0, False),
    "layer_overhead_s_": (0.0, 0.01, True),
    "moe_expert_overhead_s": (0.0, 0.01, True),
    "allreduce_latency_s_": (0.0, 0.01, True),
    "prefill_compute_efficiency": (0.0, 1.0, False),
    "decode_compute_efficiency": (0.0, 1.0, False),
    "min_stream_tokens_per_s": (0.0, 1000.0, False),
}
# Constants the engine always reads; per-platform and per-link ones are required
# for every platform and link the catalog's devices use (catalog/loader.py).
REQUIRED_CALIBRATION = (
    "kv_heuristic_mib_per_billion",
    "moe_expert_overhead_s",
    "prefill_compute_efficiency",
    "decode_compute_efficiency",
    "min_stream_tokens_per_s",
)


def calibration_range(name: str) -> tuple[float, float, bool]:
    """(low, high, low included) of a calibration constant; the default is [0, 1e12]."""
    if name in CALIBRATION_RANGES:
        return CALIBRATION_RANGES[name]
    for key, bounds in CALIBRATION_RANGES.items():
        if key.endswith("_") and name.startswith(key):
            return bounds
    return (0.0, 1e12, True)


class Calibration(BaseModel):
    """One calibration constant with its value, unit, meaning and source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: Float = Field(description="The constant's value.")
    unit: Annotated[Text, StringConstraints(max_length=40)] = Field(description="Unit of value.")
    meaning: Text = Field(description="What the constant does in the engine.")
    source: Source = Field(description="Where the value comes from.")


class Settings(BaseModel):
    """Sweep-wide settings with documented defaults (``catalog/settings.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    contexts: tuple[Annotated[Int, Field(gt=0, le=10_485_760)], ...] = Field(
        default=(2048, 4096, 8192, 16384, 32768, 131072),
        min_length=1,
        description="Context lengths swept [tokens]; each is capped at the model's maximum.",
    )
    default_kv_dtype: EntityId = Field(
        default="auto", description="KV-cache dtype used when none is asked for."
    )
    sweep_quants: tuple[EntityId, ...] = Field(
        default=("q4_k_m", "q8_0", "bf16", "fp8", "awq-int4"),
        min_length=1,
        description=(
            "Quants the batch sweep covers (every catalog quant stays available to "
            "`backpressure estimate`)."
        ),
    )
    prompt_tokens: Int = Field(
        default=1024,
        gt=0,
        le=1_048_576,
        description="Prompt length of the request profile the load sweep offers [tokens].",
    )
    output_tokens: Int = Field(
        default=128,
        gt=0,
        le=1_048_576,
        description="Output length of the request profile [tokens].",
    )
    ttft_budget_ms: Float = Field(
        default=1500, gt=0, le=MAX_MS, description="Hard time-to-first-token budget [ms]."
    )
    p99_slo_ms: Float | None = Field(
        default=None,
        gt=0,
        le=MAX_MS,
        description=(
            "p99 end-to-end latency SLO [ms]; unset means the TTFT budget plus the output "
            "streamed at the minimum per-stream rate (calibration min_stream_tokens_per_s)."
        ),
    )
    soak_utilization: Float = Field(
        default=0.85, gt=0, le=1, description="Utilization that fails a soak if held [share]."
    )
    soak_seconds: Float = Field(
        default=120,
        gt=0,
        le=MAX_S,
        description="How long the soak utilization must hold to fail [s].",
    )
    load_points: Int = Field(
        default=40, ge=4, le=400, description="Offered-load levels per config in the load sweep."
    )
    load_min_fraction: Float = Field(
        default=0.1, gt=0, lt=1, description="Lowest offered load, as a share of saturation."
    )
    load_max_fraction: Float = Field(
        default=3.0, gt=1, le=100, description="Highest offered load, as a share of saturation."
    )
    sim_seconds: Float = Field(
        default=180, gt=0, le=86_400, description="Simulated duration of each load level [s]."
    )
    sim_min_service_times: Float = Field(
        default=4,
        ge=0,
        le=100,
        description="A config's run lasts at least this many mean service times, rounded up "
        "to a whole multiple of sim_seconds, so that a slow server is seen busy [-].",
    )
    seed: Int = Field(default=0, ge=0, lt=2**32, description="Seed of the sweep's simulation.")
    queue_depth_per_slot: Float = Field(
        default=8,
        ge=0,
        le=10_000,
        description="Requests the LLM server's queue holds per slot before it sheds [-].",
    )
    queue_max_age_s: Float = Field(
        default=60,
        gt=0,
        le=MAX_S,
        description="Queued requests older than this are abandoned [s].",
    )
