"""Pydantic schema for the catalog: one YAML file per entity, filename = id.

Every numeric fact carries a source: each entity has a ``sources`` mapping from
field name to a URL or document, and validation fails if a numeric field that is
set has no entry there. Units are SI base units and are named in the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from backpressure.catalog.constants import (
    CALIBRATION_RANGES,
    REQUIRED_CALIBRATION,
    Calibration,
    Settings,
    calibration_range,
)
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
from backpressure.catalog.prices import PurchasePrice, RentalPrice, one_default
from backpressure.catalog.support import Format, Generation
from pydantic import BaseModel, ConfigDict, Field, Strict, StringConstraints, model_validator

# Largest token count of llama.cpp's Metal small-batch (mat-vec-ext) kernel:
# ggml-metal-ops.cpp ggml_metal_op_mul_mat, 'ne11 >= 2 && ne11 <= 8'
METAL_MAT_VEC_MAX = 8

__all__ = [
    "CALIBRATION_RANGES",
    "ID_PATTERN",
    "REQUIRED_CALIBRATION",
    "Bool",
    "Calibration",
    "EntityId",
    "Float",
    "Int",
    "Name",
    "Note",
    "Settings",
    "Source",
    "Text",
    "calibration_range",
]

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
MAX_POWER_W = 20_000
MAX_OVERHEAD_BYTES = TIB
MAX_BATCH_TOKENS = 2**24
MAX_PARAMS = 10**14


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
    generation: Generation = Field(
        description="Architecture generation; catalog/support.yaml says what runs on it."
    )
    fp4_flops_per_s: Int | None = Field(
        default=None,
        gt=0,
        le=MAX_FLOPS_PER_S,
        description="Dense (no sparsity) FP4 tensor throughput [FLOP/s], if the chip has FP4.",
    )
    board_power_w: Float | None = Field(
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

    format: Format = Field(description="Family of the format.")
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
    metal_ext_min_tokens: Int | None = Field(
        default=None,
        ge=2,
        le=8,
        description=(
            "llama.cpp on Metal: fewest tokens a pass needs for the small-batch mat-vec "
            "kernel that reads a weight once for several tokens; unset = none for this "
            "format (each token's column reads the weights again) [tokens]."
        ),
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


# A token count inside a mapping, bounded like the scalar token fields.
Tokens = Annotated[int, Strict(), Field(ge=1, le=1_048_576)]
BackendName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]{1,20}$")]
PlatformName = Literal["nvidia", "amd", "apple", "intel", "cpu"]


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
    scheduler: Literal["vllm", "llama.cpp"] = Field(
        default="llama.cpp",
        description=(
            "How the server batches work (engine/serving): vllm pages the KV cache in blocks "
            "and admits by the blocks a request holds, with chunked prefill and preemption; "
            "llama.cpp splits the context into -np fixed slots."
        ),
    )
    block_tokens: Int | None = Field(
        default=None, ge=1, le=1024, description="vLLM: tokens per KV-cache block [tokens]."
    )
    max_num_seqs: Int | None = Field(
        default=None,
        ge=1,
        le=65_536,
        description="vLLM: default max_num_seqs of the OpenAI server on smaller GPUs [-].",
    )
    large_gpu_max_num_seqs: Int | None = Field(
        default=None,
        ge=1,
        le=65_536,
        description="vLLM: default max_num_seqs on GPUs at or above large_gpu_memory_bytes [-].",
    )
    small_defaults_name: Text | None = Field(
        default=None,
        max_length=40,
        description=(
            "vLLM: GPUs whose name contains this keep the smaller defaults whatever their "
            "memory (vLLM does so for the A100)."
        ),
    )
    n_batch: Int | None = Field(
        default=None,
        ge=1,
        le=1_048_576,
        description="llama.cpp: logical batch, the most tokens one step processes [tokens].",
    )
    n_ubatch: Int | None = Field(
        default=None,
        ge=1,
        le=1_048_576,
        description="llama.cpp: physical batch, the tokens of one forward pass [tokens].",
    )
    version: Text | None = Field(
        default=None,
        max_length=40,
        pattern=r"^[0-9][0-9A-Za-z.+-]*$",
        description="Release of the runtime this profile describes, e.g. '0.19.0'.",
    )
    v1_since: Text | None = Field(
        default=None,
        max_length=40,
        description=(
            "vLLM: first release whose engine (V1) profiles a max_num_batched_tokens batch; "
            "older ones profiled a max_model_len-sized batch."
        ),
    )
    cudagraph_counted_since: Text | None = Field(
        default=None,
        max_length=40,
        description="vLLM: first release that subtracts the CUDA-graph pool from the KV budget.",
    )
    sampler_peak_since: Text | None = Field(
        default=None,
        max_length=40,
        description=(
            "vLLM: first release whose profiled activation peak is measured to follow the "
            "sampler's logits (max_num_seqs x vocabulary) and the forward pass's widths; "
            "older releases use activation_bytes_per_batched_token."
        ),
    )
    sampler_bytes_per_logit: Float | None = Field(
        default=None,
        gt=0,
        le=1024,
        description="vLLM: profiled sampler peak per logit (max_num_seqs x vocabulary) [bytes].",
    )
    cudagraph_bytes_per_gpu: Int | None = Field(
        default=None,
        ge=0,
        le=MAX_MEMORY_BYTES,
        description="vLLM: CUDA-graph pool per GPU, subtracted from that release on [bytes].",
    )
    visible_memory_fraction: Float | None = Field(
        default=None,
        gt=0.5,
        le=1,
        description=(
            "vLLM: share of the nominal memory the driver reports as total, which "
            "gpu_memory_utilization multiplies."
        ),
    )
    mxfp4_hidden_align: Int | None = Field(
        default=None, ge=1, le=4096, description="vLLM: MXFP4 experts' hidden size padded to [-]."
    )
    mxfp4_intermediate_align: Int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="vLLM: MXFP4 experts' intermediate size padded to [-].",
    )
    expert_parallel: Bool | None = Field(
        default=None,
        description=(
            "Whether a mixture-of-experts model over several GPUs deals its experts out "
            "whole (expert parallel) rather than splitting every expert across them "
            "(tensor parallel); unset = false."
        ),
    )
    backends: dict[Generation, BackendName] | None = Field(
        default=None,
        description=(
            "Per GPU generation, the backend this runtime is costed on where it is not the "
            "platform's first (llama.cpp on RDNA: vulkan, not rocm); its decode constants are "
            "the calibration's <platform>_<backend> ones."
        ),
    )
    expert_pair_reads_below: dict[PlatformName, Tokens] | None = Field(
        default=None,
        description=(
            "Per platform: below this many tokens in a forward pass the MoE kernel reads one "
            "expert per (token, chosen expert) pair, not each distinct expert once [tokens]."
        ),
    )
    metal_ext_columns: dict[Tokens, Tokens] | None = Field(
        default=None,
        description=(
            "llama.cpp on Metal: for each token count of a pass up to the mat-vec limit, "
            "the tokens one read of a weight serves in the small-batch kernel [tokens]."
        ),
    )
    metal_ext_row_multiple: Int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="llama.cpp on Metal: the small-batch kernel needs rows a multiple of this [-].",
    )
    metal_tile_tokens: Int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description=(
            "llama.cpp on Metal: tokens a matrix-matrix tile computes, filled or not, "
            "above the mat-vec limit [tokens]."
        ),
    )
    mxfp4_rest_bits_per_weight: Float | None = Field(
        default=None,
        ge=1,
        le=32,
        description=(
            "Bits the weights outside an MXFP4 model's routed experts are stored at in this "
            "runtime's files (llama.cpp's GGUF: Q8_0); unset = 16."
        ),
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
        given = sorted(self.metal_ext_columns or {})
        if given and given != list(range(2, given[-1] + 1)):
            raise ValueError(
                f"metal_ext_columns: token counts {given} leave gaps; give every count "
                f"from 2 to {given[-1]}"
            )
        for tokens, columns in (self.metal_ext_columns or {}).items():
            # ggml's small-batch kernel runs for 2..8 tokens a pass; the engine packs
            # exactly that range, so a key outside it would be silently ignored
            if not 2 <= tokens <= METAL_MAT_VEC_MAX:
                raise ValueError(
                    f"metal_ext_columns: token count {tokens} outside the small-batch "
                    f"kernel's range 2..{METAL_MAT_VEC_MAX}"
                )
            if not 1 <= columns <= tokens:
                raise ValueError(
                    f"metal_ext_columns: {columns} columns for {tokens} tokens "
                    "(one read serves 1 to that many tokens)"
                )
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
