"""Pydantic schema for the catalog: one YAML file per entity, filename = id.

Every numeric fact carries a source: each entity has a ``sources`` mapping from
field name to a URL or document, and validation fails if a numeric field that is
set has no entry there. Units are SI base units and are named in the field.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

from backpressure.catalog.prices import ElectricityPrice, PurchasePrice, RentalPrice, one_default
from backpressure.catalog.support import Format, Generation
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

# Ids become URL path segments and file names: lower case, no slashes, no dots
# at the start, bounded length. Runtime ids may contain a dot (``llama.cpp``).
ID_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,79}$"
EntityId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]

# Display names: printable, bounded, no control characters.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
Name = Annotated[str, StringConstraints(min_length=1, max_length=120)]
Source = Annotated[str, StringConstraints(min_length=4, max_length=500)]

TIB = 1024**4

# Sanity bounds: generous enough for any real part, tight enough to catch a
# unit slip (GB/s typed as B/s, or bytes typed as GB).
MAX_MEMORY_BYTES = 16 * TIB
MAX_BANDWIDTH_BYTES_PER_S = 100 * 10**12
MAX_FLOPS_PER_S = 100 * 10**15
MAX_POWER_W = 20_000


class Entity(BaseModel):
    """Common base: strict keys, frozen, a source for every numeric field."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: EntityId = Field(description="Stable identifier; equals the YAML file name.")
    name: Name = Field(description="Human-readable name shown on pages.")
    sources: dict[str, Source] = Field(
        default_factory=dict,
        description="Field name -> URL or document that states the value.",
    )
    notes: str | None = Field(default=None, max_length=2000, description="Free-text caveats.")

    @model_validator(mode="after")
    def _names_are_clean(self) -> Entity:
        for field in ("id", "name"):
            if _CONTROL.search(getattr(self, field)):
                raise ValueError(f"{field}: control characters are not allowed")
        if ".." in self.id or "--" in self.id:
            raise ValueError("id: '..' and '--' are not allowed in an id")
        return self

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
    memory_bytes: int = Field(gt=0, le=MAX_MEMORY_BYTES, description="Installed memory [bytes].")
    bandwidth_bytes_per_s: int = Field(
        gt=0, le=MAX_BANDWIDTH_BYTES_PER_S, description="Peak memory bandwidth [bytes/s]."
    )
    bf16_flops_per_s: int | None = Field(
        default=None,
        gt=0,
        le=MAX_FLOPS_PER_S,
        description="Dense (no sparsity) BF16/FP16 tensor throughput [FLOP/s].",
    )
    fp8_flops_per_s: int | None = Field(
        default=None,
        gt=0,
        le=MAX_FLOPS_PER_S,
        description="Dense (no sparsity) FP8 tensor throughput [FLOP/s], if the chip has FP8.",
    )
    usable_memory_fraction: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Share of memory_bytes a model may use (unified and system memory only).",
    )
    generation: Generation = Field(
        description="Architecture generation; catalog/support.yaml says what runs on it."
    )
    fp4_flops_per_s: int | None = Field(
        default=None,
        gt=0,
        le=MAX_FLOPS_PER_S,
        description="Dense (no sparsity) FP4 tensor throughput [FLOP/s], if the chip has FP4.",
    )
    board_power_w: float | None = Field(
        default=None, gt=0, le=MAX_POWER_W, description="Rated power at full load [W]."
    )
    board_power_kind: Literal["board", "chip", "module", "system"] | None = Field(
        default=None,
        description=(
            "What board_power_w covers: board (a card's total board or graphics power), "
            "chip (the SoC or CPU package alone), module (a compute module), system (the "
            "whole machine, at the wall or its power-supply rating)."
        ),
    )
    rental_prices: tuple[RentalPrice, ...] = Field(
        default=(), description="On-demand rental prices per GPU-hour, each sourced and dated."
    )
    purchase_prices: tuple[PurchasePrice, ...] = Field(
        default=(), description="Prices to buy the device, each sourced and dated."
    )

    @property
    def platform(self) -> str:
        """Calibration platform: the vendor, or 'cpu' for a host serving from system RAM."""
        return "cpu" if self.memory_kind == "system" else self.vendor

    @model_validator(mode="after")
    def _fraction_matches_kind(self) -> Gpu:
        if self.memory_kind == "discrete" and self.usable_memory_fraction is not None:
            raise ValueError("usable_memory_fraction: only unified or system memory has one")
        if self.memory_kind != "discrete" and self.usable_memory_fraction is None:
            raise ValueError(f"usable_memory_fraction: required for {self.memory_kind} memory")
        return self

    @model_validator(mode="after")
    def _power_and_prices(self) -> Gpu:
        if (self.board_power_w is None) != (self.board_power_kind is None):
            raise ValueError("board_power_kind: give it exactly when board_power_w is set")
        one_default(self.rental_prices, "rental_prices")
        one_default(self.purchase_prices, "purchase_prices")
        return self


class Rig(Entity):
    """Several identical GPUs serving one model with tensor parallelism."""

    gpu: EntityId = Field(description="Id of the GPU the rig is built from.")
    count: int = Field(ge=2, le=64, description="Number of GPUs (tensor-parallel degree).")
    interconnect: Literal["pcie", "nvlink", "infinity-fabric"] = Field(
        description="GPU-to-GPU link used for the all-reduce."
    )
    interconnect_bandwidth_bytes_per_s: int = Field(
        gt=0,
        le=MAX_BANDWIDTH_BYTES_PER_S,
        description="Per-GPU unidirectional link bandwidth [bytes/s].",
    )


class Quant(Entity):
    """A weight format, costed at its effective bits per weight."""

    format: Format = Field(description="Family of the format.")
    bits_per_weight: float = Field(
        gt=0, le=32, description="Effective storage cost including scales and minimums [bits]."
    )
    embedding_bits_per_weight: float | None = Field(
        default=None,
        gt=0,
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

    bytes_per_element: float | None = Field(
        default=None,
        gt=0,
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
    framework_overhead_bytes: int | None = Field(
        default=None,
        ge=0,
        le=MAX_MEMORY_BYTES,
        description="Fixed overhead: CUDA context, compute buffers [bytes] (fixed-overhead).",
    )
    gpu_memory_utilization: float | None = Field(
        default=None, gt=0, le=1, description="Default share of device memory the server claims."
    )
    non_torch_bytes: int | None = Field(
        default=None,
        ge=0,
        le=MAX_MEMORY_BYTES,
        description="Memory outside the framework allocator: NCCL, cuBLAS workspaces [bytes].",
    )
    max_num_batched_tokens: int | None = Field(
        default=None,
        gt=0,
        description="Tokens in the profiling batch that sets the activation peak.",
    )
    large_gpu_memory_bytes: int | None = Field(
        default=None,
        gt=0,
        le=MAX_MEMORY_BYTES,
        description="GPUs with at least this much memory get the larger default token budget.",
    )
    large_gpu_max_num_batched_tokens: int | None = Field(
        default=None,
        gt=0,
        description="Profiling-batch tokens on GPUs at or above large_gpu_memory_bytes.",
    )
    activation_bytes_per_batched_token: float | None = Field(
        default=None,
        gt=0,
        description="Profiled activation peak per token of the profiling batch [bytes].",
    )
    tp_extra_bytes_per_gpu: int | None = Field(
        default=None,
        ge=0,
        le=MAX_MEMORY_BYTES,
        description="Extra per-GPU memory under tensor parallelism: all-reduce buffers [bytes].",
    )
    scheduler: Literal["vllm", "llama.cpp"] = Field(
        default="llama.cpp",
        description=(
            "How the server batches work (engine/serving): vllm pages the KV cache in blocks "
            "and admits by the blocks a request holds, with chunked prefill and preemption; "
            "llama.cpp splits the context into -np fixed slots."
        ),
    )
    block_tokens: int | None = Field(
        default=None, ge=1, le=1024, description="vLLM: tokens per KV-cache block [tokens]."
    )
    max_num_seqs: int | None = Field(
        default=None,
        ge=1,
        le=65_536,
        description="vLLM: default max_num_seqs of the OpenAI server on smaller GPUs [-].",
    )
    large_gpu_max_num_seqs: int | None = Field(
        default=None,
        ge=1,
        le=65_536,
        description="vLLM: default max_num_seqs on GPUs at or above large_gpu_memory_bytes [-].",
    )
    small_defaults_name: str | None = Field(
        default=None,
        max_length=40,
        description=(
            "vLLM: GPUs whose name contains this keep the smaller defaults whatever their "
            "memory (vLLM does so for the A100)."
        ),
    )
    n_batch: int | None = Field(
        default=None,
        ge=1,
        le=1_048_576,
        description="llama.cpp: logical batch, the most tokens one step processes [tokens].",
    )
    n_ubatch: int | None = Field(
        default=None,
        ge=1,
        le=1_048_576,
        description="llama.cpp: physical batch, the tokens of one forward pass [tokens].",
    )
    version: str | None = Field(
        default=None,
        max_length=40,
        pattern=r"^[0-9][0-9A-Za-z.+-]*$",
        description="Release of the runtime this profile describes, e.g. '0.19.0'.",
    )
    v1_since: str | None = Field(
        default=None,
        max_length=40,
        description=(
            "vLLM: first release whose engine (V1) profiles a max_num_batched_tokens batch; "
            "older ones profiled a max_model_len-sized batch."
        ),
    )
    cudagraph_counted_since: str | None = Field(
        default=None,
        max_length=40,
        description="vLLM: first release that subtracts the CUDA-graph pool from the KV budget.",
    )
    cudagraph_bytes_per_gpu: int | None = Field(
        default=None,
        ge=0,
        le=MAX_MEMORY_BYTES,
        description="vLLM: CUDA-graph pool per GPU, subtracted from that release on [bytes].",
    )
    visible_memory_fraction: float | None = Field(
        default=None,
        gt=0.5,
        le=1,
        description=(
            "vLLM: share of the nominal memory the driver reports as total, which "
            "gpu_memory_utilization multiplies."
        ),
    )
    mxfp4_hidden_align: int | None = Field(
        default=None, ge=1, le=4096, description="vLLM: MXFP4 experts' hidden size padded to [-]."
    )
    mxfp4_intermediate_align: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="vLLM: MXFP4 experts' intermediate size padded to [-].",
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

    hf_repo: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")] = Field(
        description="Hugging Face repository id the config.json comes from."
    )
    family: Name = Field(description="Model family shown on hub pages, e.g. 'Llama 3.1'.")
    published_params: int | None = Field(
        default=None, gt=0, description="Total parameter count as published [parameters]."
    )
    published_active_params: int | None = Field(
        default=None, gt=0, description="Active parameters per token as published (MoE)."
    )
    config: dict[str, Any] = Field(
        description="The model's config.json (verbatim, or the architecture keys of it)."
    )

    def _extra_source_keys(self) -> frozenset[str]:
        return frozenset({"config"})

    @model_validator(mode="after")
    def _config_is_sourced(self) -> Model:
        if "config" not in self.sources:
            raise ValueError("sources: 'config' (the config.json URL) is required")
        if (
            self.published_params is not None
            and self.published_active_params is not None
            and self.published_active_params > self.published_params
        ):
            raise ValueError("published_active_params: more active than total parameters")
        return self


class Calibration(BaseModel):
    """One calibration constant with its value, unit, meaning and source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float = Field(description="The constant's value.")
    unit: str = Field(max_length=40, description="Unit of value.")
    meaning: str = Field(max_length=500, description="What the constant does in the engine.")
    source: Source = Field(description="Where the value comes from.")


class Settings(BaseModel):
    """Sweep-wide settings with documented defaults (``catalog/settings.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    contexts: tuple[Annotated[int, Field(gt=0, le=10_485_760)], ...] = Field(
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
    prompt_tokens: int = Field(
        default=1024,
        gt=0,
        le=1_048_576,
        description="Prompt length of the request profile the load sweep offers [tokens].",
    )
    output_tokens: int = Field(
        default=128,
        gt=0,
        le=1_048_576,
        description="Output length of the request profile [tokens].",
    )
    ttft_budget_ms: float = Field(
        default=1500, gt=0, description="Hard time-to-first-token budget [ms]."
    )
    p99_slo_ms: float | None = Field(
        default=None,
        gt=0,
        description=(
            "p99 end-to-end latency SLO [ms]; unset means the TTFT budget plus the output "
            "streamed at the minimum per-stream rate (calibration min_stream_tokens_per_s)."
        ),
    )
    soak_utilization: float = Field(
        default=0.85, gt=0, le=1, description="Utilization that fails a soak if held [share]."
    )
    soak_seconds: float = Field(
        default=120, gt=0, description="How long the soak utilization must hold to fail [s]."
    )
    availability: float = Field(
        default=0.999,
        gt=0,
        lt=1,
        description="Share of offered requests that must be served; the rest is the error "
        "budget, and losing more of it fails the error-budget rule [share].",
    )
    min_usable_tokens_per_s: float = Field(
        default=5.0,
        gt=0,
        le=10_000,
        description="A config whose single stream decodes slower than this is too slow to "
        "use: it gets its own verdict and no breaking rate [tokens/s].",
    )
    min_usable_reason: str = Field(
        default="",
        max_length=500,
        description="Why the usable floor is where it is (printed beside the verdict).",
    )
    measure_requests: int = Field(
        default=1500,
        ge=100,
        le=1_000_000,
        description="Arrivals an open-loop run measures (after its warm-up), however long "
        "they take [-].",
    )
    probe_requests: int = Field(
        default=300,
        ge=50,
        le=1_000_000,
        description="Arrivals of a probe run, which brackets the break before full runs "
        "decide it [-].",
    )
    probe_bracket: float = Field(
        default=1.3,
        gt=1.0,
        le=10.0,
        description="Probes narrow the break to within this factor; full runs take it from "
        "there [-].",
    )
    min_measure_seconds: float = Field(
        default=10,
        gt=0,
        le=86_400,
        description="The shortest measured window of a run [s].",
    )
    warmup_seconds: float = Field(
        default=30,
        ge=0,
        le=86_400,
        description="The longest warm-up of a run: arrivals before it are not measured [s].",
    )
    load_min_fraction: float = Field(
        default=0.05,
        gt=0,
        le=1,
        description="The lowest offered rate tried, as a share of the closed-loop saturation "
        "rate; a config failing there fails at any load [share].",
    )
    breaking_tolerance: float = Field(
        default=0.02,
        gt=0.001,
        le=0.5,
        description="The breaking rate is bisected until a rate that holds and one that fails "
        "are this close (relative) [-].",
    )
    max_load_doublings: int = Field(
        default=4,
        ge=0,
        le=20,
        description="How often the load is doubled past saturation looking for a failure [-].",
    )
    curve_fractions: tuple[Annotated[float, Field(gt=0, le=10)], ...] = Field(
        default=(0.3, 0.6),
        description="Extra open-loop runs for the latency-against-load chart, as shares of the "
        "breaking rate [share].",
    )
    max_users: int = Field(
        default=1024,
        ge=1,
        le=65_536,
        description="The concurrency table (closed loop) stops at this many users [-].",
    )
    seed: int = Field(default=0, ge=0, lt=2**32, description="Seed of the sweep's simulation.")
    queue_depth_per_slot: float = Field(
        default=8,
        ge=0,
        le=10_000,
        description="Requests the LLM server's queue holds per slot before it sheds [-].",
    )
    queue_max_age_s: float = Field(
        default=60,
        gt=0,
        description="Queued requests older than this are abandoned [s].",
    )
    electricity: ElectricityPrice = Field(
        default=ElectricityPrice(
            usd_per_kwh=0.1545,
            region="United States",
            sector="residential",
            period="January 2024",
            as_of=dt.date(2024, 3, 26),
            source="https://www.eia.gov/electricity/monthly/update/end-use.php",
        ),
        description=(
            "Electricity price owner-run hardware is costed at, with its source and "
            "date (catalog/settings.yaml gives the figure used)."
        ),
    )
    amortisation_years: float = Field(
        default=3,
        gt=0,
        le=20,
        description=(
            "Years a purchased device's price is spread over when it is costed per hour "
            "(straight line, no resale value) [years]."
        ),
    )
