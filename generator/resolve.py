"""Turn catalog entries into the engine's plain inputs and run the capacity engine."""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from typing import TypeVar, cast

from backpressure.catalog.constants import Calibration
from backpressure.catalog.loader import Catalog, load_catalog
from backpressure.catalog.schema import Gpu, KvDtype, Quant
from backpressure.catalog.schema import Runtime as RuntimeEntry
from backpressure.catalog.support import Compute, compute_precision, refusal, serves
from backpressure.engine.arch import ModelArch
from backpressure.engine.bands import Band, seed_widened, serving_band_rule
from backpressure.engine.capacity import estimate
from backpressure.engine.inputs import Constants, Device, Platform, Runtime, WeightFormat
from backpressure.engine.results import CapacityResult

T = TypeVar("T")

# Activation dtype of 'auto' KV caches: vLLM runs FP32 and FP16 checkpoints in
# FP16 and BF16 ones in BF16, and llama.cpp's default cache type is f16; both are 2 bytes.
AUTO_KV_BYTES = 2.0


class LookupError_(KeyError):
    """An unknown id; the message names it and suggests the nearest known ids."""

    def __init__(self, kind: str, wanted: str, known: list[str]) -> None:
        near = difflib.get_close_matches(wanted, known, n=3, cutoff=0.4)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        self.message = f"unknown {kind} {wanted!r}{hint}"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


def canonical_id(table: dict[str, T], kind: str, wanted: str) -> str:
    """The catalog id ``wanted`` names, in any case (pages write ``Q4_K_M``, ``RTX-4090``).

    Raises LookupError_ with the nearest ids for an id the table does not hold.
    """
    if wanted in table:
        return wanted
    folded = {k.casefold(): k for k in table}
    if wanted.casefold() in folded:
        return folded[wanted.casefold()]
    raise LookupError_(kind, wanted, list(table))


def lookup(table: dict[str, T], kind: str, wanted: str) -> T:
    """Fetch ``wanted`` (in any case) from ``table`` or raise with the nearest ids."""
    return table[canonical_id(table, kind, wanted)]


# constants(cat) by the identity of the catalog's calibration table: a sweep asks
# for them once per config, and building them is a scan of every entry
_CONSTANTS: dict[int, tuple[dict[str, Calibration], Constants]] = {}


def constants(cat: Catalog) -> Constants:
    """Calibration constants from catalog/calibration.yaml."""
    seen = _CONSTANTS.get(id(cat.calibration))
    if seen is not None and seen[0] is cat.calibration:
        return seen[1]
    built = _build_constants(cat)
    _CONSTANTS[id(cat.calibration)] = (cat.calibration, built)
    return built


def _build_constants(cat: Catalog) -> Constants:
    c = {name: cal.value for name, cal in cat.calibration.items()}

    def group(prefix: str) -> dict[str, float]:
        return {k.removeprefix(prefix): v for k, v in c.items() if k.startswith(prefix)}

    return Constants(
        kv_heuristic_mib_per_billion=c["kv_heuristic_mib_per_billion"],
        bandwidth_efficiency=group("bandwidth_efficiency_"),
        layer_overhead_s=group("layer_overhead_s_"),
        moe_expert_overhead_s=c["moe_expert_overhead_s"],
        moe_layer_overhead_s=group("moe_layer_overhead_s_"),
        allreduce_latency_s=group("allreduce_latency_s_"),
        prefill_compute_efficiency=c["prefill_compute_efficiency"],
        decode_compute_efficiency=c["decode_compute_efficiency"],
        min_stream_tokens_per_s=c["min_stream_tokens_per_s"],
        serving_compute_efficiency=group("serving_compute_efficiency_"),
        serving_bandwidth_factor=group("serving_bandwidth_factor_"),
        step_overhead_s=group("step_overhead_s_"),
        seq_overhead_s=group("seq_overhead_s_"),
        request_overhead_s=group("request_overhead_s_"),
        request_latency_s=group("request_latency_s_"),
        serving_moe_efficiency=group("serving_moe_efficiency_"),
        serving_moe_layer_overhead_s=group("serving_moe_layer_overhead_s_"),
        serving_moe_eager_layer_s=group("serving_moe_eager_layer_s_"),
    )


# The backend each platform's plain calibration keys were fitted on; a backend
# fitted apart has keys of its own (``bandwidth_efficiency_amd_vulkan``).
FIRST_BACKEND = {
    "nvidia": "cuda",
    "amd": "rocm",
    "apple": "metal",
    "intel": "vulkan",
    "cpu": "cpu",
}
BACKEND_LABELS = {
    "cuda": "CUDA",
    "rocm": "ROCm",
    "metal": "Metal",
    "vulkan": "Vulkan",
    "cpu": "CPU",
}


def own_backends(cat: Catalog, platform: str) -> list[str]:
    """Backends of ``platform`` with decode constants of their own, sorted."""
    prefix = f"bandwidth_efficiency_{platform}_"
    return sorted(k.removeprefix(prefix) for k in cat.calibration if k.startswith(prefix))


def device_from_gpu(
    gpu: Gpu, count: int = 1, interconnect: str | None = None, link: int | None = None
) -> Device:
    """Engine device for a catalog GPU (or ``count`` of them)."""
    return Device(
        name=gpu.name if count == 1 else f"{count}x {gpu.name}",
        memory_kind=gpu.memory_kind,
        # The schema's vendors plus 'cpu' are the engine's platforms; the catalog
        # loader checks that each one has its calibration constants.
        platform=cast(Platform, gpu.platform),
        memory_bytes=gpu.memory_bytes,
        bandwidth_bytes_per_s=gpu.bandwidth_bytes_per_s,
        bf16_flops_per_s=gpu.bf16_flops_per_s,
        fp8_flops_per_s=gpu.fp8_flops_per_s,
        usable_memory_fraction=gpu.usable_memory_fraction,
        count=count,
        interconnect=interconnect,  # type: ignore[arg-type]
        interconnect_bandwidth_bytes_per_s=link,
        generation=gpu.generation,
    )


def gpu_entry(cat: Catalog, device_id: str) -> Gpu:
    """The catalog GPU a device id names: the GPU itself, or the one a rig is built from."""
    if device_id in cat.rigs:
        return cat.gpus[cat.rigs[device_id].gpu]
    lookup({**cat.gpus, **cat.rigs}, "GPU", device_id)  # unknown id: raise with the nearest
    return cat.gpus[device_id]


def device_for(cat: Catalog, device_id: str) -> Device:
    """A GPU or a rig by id."""
    if device_id in cat.rigs:
        rig = cat.rigs[device_id]
        return device_from_gpu(
            cat.gpus[rig.gpu], rig.count, rig.interconnect, rig.interconnect_bandwidth_bytes_per_s
        )
    if device_id not in cat.gpus:
        lookup({**cat.gpus, **cat.rigs}, "GPU", device_id)  # unknown id: raise with the nearest
    return device_from_gpu(cat.gpus[device_id])


def runtime_profile(entry: RuntimeEntry) -> Runtime:
    """Engine runtime profile for a catalog runtime."""
    return Runtime(
        name=entry.name,
        style=entry.style,
        multi_gpu=entry.multi_gpu,
        framework_overhead_bytes=entry.framework_overhead_bytes or 0,
        gpu_memory_utilization=entry.gpu_memory_utilization or 1.0,
        non_torch_bytes=entry.non_torch_bytes or 0,
        max_num_batched_tokens=entry.max_num_batched_tokens or 0,
        large_gpu_memory_bytes=entry.large_gpu_memory_bytes or 0,
        large_gpu_max_num_batched_tokens=entry.large_gpu_max_num_batched_tokens or 0,
        activation_bytes_per_batched_token=entry.activation_bytes_per_batched_token or 0.0,
        tp_extra_bytes_per_gpu=entry.tp_extra_bytes_per_gpu or 0,
        scheduler=entry.scheduler,
        block_tokens=entry.block_tokens or 16,
        max_num_seqs=entry.max_num_seqs or 0,
        large_gpu_max_num_seqs=entry.large_gpu_max_num_seqs or 0,
        small_defaults_name=entry.small_defaults_name or "",
        n_batch=entry.n_batch or 2048,
        n_ubatch=entry.n_ubatch or 512,
        version=entry.version or "",
        v1_since=entry.v1_since or "",
        cudagraph_counted_since=entry.cudagraph_counted_since or "",
        cudagraph_bytes_per_gpu=entry.cudagraph_bytes_per_gpu or 0,
        sampler_peak_since=entry.sampler_peak_since or "",
        sampler_bytes_per_logit=entry.sampler_bytes_per_logit or 0.0,
        visible_memory_fraction=entry.visible_memory_fraction or 1.0,
        mxfp4_hidden_align=entry.mxfp4_hidden_align or 0,
        mxfp4_intermediate_align=entry.mxfp4_intermediate_align or 0,
        mxfp4_rest_bits=entry.mxfp4_rest_bits_per_weight or 0.0,
        expert_parallel=bool(entry.expert_parallel),
        expert_pair_reads_below=tuple(sorted((entry.expert_pair_reads_below or {}).items())),
        backends=tuple(sorted((entry.backends or {}).items())),
        metal_ext_columns=_columns(entry.metal_ext_columns),
        metal_ext_row_multiple=entry.metal_ext_row_multiple or 0,
        metal_tile_tokens=entry.metal_tile_tokens or 0,
    )


def _columns(by_tokens: dict[int, int] | None) -> tuple[int, ...]:
    """``{tokens: columns}`` as a tuple indexed by tokens (0 where none is given)."""
    if not by_tokens:
        return ()
    out = [0] * (max(by_tokens) + 1)
    for tokens, columns in by_tokens.items():
        out[tokens] = columns
    return tuple(out)


def weight_format(quant: Quant, compute: Compute | None = None) -> WeightFormat:
    """Engine weight format for a catalog quant.

    ``compute`` is the precision its matrix products run in on the device at hand
    (:func:`compute_for`); without it, FP8 weights ask for the FP8 rate, which the
    engine uses where the device has an FP8 figure. The engine's FP8 slot is its
    low-precision slot: an FP4 combination puts the FP4 rate there (:func:`with_compute`).
    """
    low = quant.format == "fp8" if compute is None else compute != "bf16"
    return WeightFormat(
        name=quant.name,
        bits_per_weight=quant.bits_per_weight,
        embedding_bits=quant.embedding_bits_per_weight,
        fp8_compute=low,
        experts_only=quant.format == "mxfp4",
        metal_ext_min_tokens=quant.metal_ext_min_tokens or 0,
    )


def compute_for(cat: Catalog, gpu: Gpu, quant: Quant, runtime: str) -> Compute:
    """Precision of the matrix products on this GPU under this runtime.

    FP8 for FP8 weights on FP8 hardware, FP4 for NVFP4/MXFP4 only where
    catalog/support.yaml says so and the GPU has a dense FP4 figure, else BF16.
    """
    compute = compute_precision(cat.support, runtime, quant.format, gpu.generation)
    if compute == "fp4" and gpu.fp4_flops_per_s is None:
        return "bf16"
    return compute


def with_compute(device: Device, gpu: Gpu, compute: Compute) -> Device:
    """The device with its FP4 rate in the engine's low-precision slot for FP4 compute."""
    if compute != "fp4":
        return device
    return dataclasses.replace(device, fp8_flops_per_s=gpu.fp4_flops_per_s)


def kv_bytes(kv: KvDtype) -> float:
    """Bytes per cached element; 'auto' is the 2-byte activation dtype."""
    return kv.bytes_per_element if kv.bytes_per_element is not None else AUTO_KV_BYTES


def model_arch(cat: Catalog, model: str) -> tuple[str, ModelArch]:
    """Find a model by catalog id or Hugging Face repo id."""
    by_repo = {m.hf_repo.lower(): mid for mid, m in cat.models.items()}
    mid = by_repo.get(model.lower(), model)
    if mid not in cat.models and "/" in model:
        err = LookupError_("model", model, [m.hf_repo for m in cat.models.values()])
        tip = "for a model outside the catalog, pass its config.json with --model-config"
        err.message += f" {tip[0].upper()}{tip[1:]}" if err.message.endswith("?") else f"; {tip}"
        raise err
    mid = canonical_id(cat.models, "model", mid)
    return mid, cat.archs[mid]


def default_runtime(
    cat: Catalog, quant: Quant, memory_kind: str = "discrete", generation: str | None = None
) -> str:
    """The quant's most preferred runtime that serves this kind of memory.

    Given a device generation, the runtime must also serve the quant's format on it
    (catalog/support.yaml).
    """
    for rid in quant.runtimes:
        if rid not in cat.runtimes or memory_kind not in cat.runtimes[rid].memory_kinds:
            continue
        if generation is None or serves(cat.support, rid, quant.format, generation):
            return rid
    return quant.runtimes[0]


@dataclass(frozen=True, slots=True)
class Config:
    """The engine's inputs for one config: the one route from catalog ids to the engine."""

    device: Device
    runtime_id: str
    runtime: Runtime
    fmt: WeightFormat
    constants: Constants
    context: int
    kv_bytes: float
    arch: ModelArch | None = None
    params: int | None = None

    def capacity(self) -> CapacityResult:
        """Slots, both ceilings and the band (SPEC §2-3, §5)."""
        return estimate(
            self.device,
            self.runtime,
            self.fmt,
            self.constants,
            self.context,
            self.kv_bytes,
            arch=self.arch,
            params=self.params,
        )


def configure(
    cat: Catalog,
    gpu: str,
    quant: str,
    context: int,
    model: str | None = None,
    params_b: float | None = None,
    runtime: str | None = None,
    kv_dtype: str = "auto",
) -> Config:
    """The engine inputs of a config named by catalog ids; ``params_b`` stands in for a model.

    Raises LookupError_ for an unknown id and ComboError for a runtime that cannot
    serve the quant, KV dtype or device.
    """
    q = lookup(cat.quants, "quant", quant)
    dev = device_for(cat, gpu)
    entry = gpu_entry(cat, gpu)
    rt_id = runtime or default_runtime(cat, q, dev.memory_kind, entry.generation)
    check_combo(cat, q.id, rt_id, kv_dtype, dev.memory_kind, entry.generation)
    arch = model_arch(cat, model)[1] if model is not None else None
    params = round(params_b * 1e9) if params_b is not None else None
    compute = compute_for(cat, entry, q, rt_id)
    return Config(
        with_compute(dev, entry, compute),
        rt_id,
        runtime_profile(cat.runtimes[rt_id]),
        weight_format(q, compute),
        constants(cat),
        context,
        kv_bytes(cat.kv_dtypes[kv_dtype]),
        arch,
        params,
    )


def capacity_for(
    gpu: str,
    quant: str,
    context: int,
    model: str | None = None,
    params_b: float | None = None,
    runtime: str | None = None,
    kv_dtype: str = "auto",
    cat: Catalog | None = None,
) -> CapacityResult:
    """Cost a config named by catalog ids (:func:`configure`, then its capacity)."""
    return configure(
        cat or load_catalog(), gpu, quant, context, model, params_b, runtime, kv_dtype
    ).capacity()


class ComboError(ValueError):
    """A runtime that cannot serve the quant, KV dtype or device asked for."""


def check_combo(
    cat: Catalog,
    quant: str,
    runtime_id: str,
    kv_dtype: str,
    memory_kind: str,
    generation: str | None = None,
) -> None:
    """Raise ComboError unless the runtime serves this quant, KV dtype and memory kind.

    Given a device generation, the runtime must also serve the quant's format on it.
    """
    q = lookup(cat.quants, "quant", quant)
    rt = lookup(cat.runtimes, "runtime", runtime_id)
    kv = lookup(cat.kv_dtypes, "KV dtype", kv_dtype)
    if runtime_id not in q.runtimes:
        raise ComboError(
            f"quant {quant} is not served by {runtime_id} (served by: {', '.join(q.runtimes)})"
        )
    if runtime_id not in kv.runtimes:
        raise ComboError(
            f"KV dtype {kv_dtype} is not offered by {runtime_id} "
            f"(offered by: {', '.join(kv.runtimes)})"
        )
    if memory_kind not in rt.memory_kinds:
        raise ComboError(
            f"runtime {runtime_id} does not serve on {memory_kind} memory "
            f"(serves: {', '.join(rt.memory_kinds)})"
        )
    if generation is not None:
        why = refusal(cat.support, quant, q.format, generation, runtime_id)
        if why is not None:
            raise ComboError(why)


def breaking_band(cat: Catalog, band: Band, rule: str) -> Band:
    """The serving band widened for the arrival noise of a break by ``rule``.

    ``serving_seed_pct_<rule>`` in calibration.yaml is how far such a breaking
    rate moves between arrival seeds (benchmarks/seed_spread.py).
    """
    cal = cat.calibration.get(f"serving_seed_pct_{rule}")
    label = {"ttft": "TTFT", "p99": "p99", "error_budget": "shedding", "soak": "soak"}.get(
        rule, rule
    )
    return seed_widened(band, cal.value if cal is not None else None, label)


def serving_band(cat: Catalog, runtime_id: str, is_moe: bool, cap: CapacityResult) -> Band:
    """The band of a config's serving numbers: the capacity band, or wider where the data says.

    ``serving_band_pct_<scheduler>_<dense|moe>`` in calibration.yaml is the band
    that published serving runs of that kind need (benchmarks/fit_serving.py).
    """
    entry = cat.runtimes[runtime_id]
    kind = "moe" if is_moe else "dense"
    cal = cat.calibration.get(f"serving_band_pct_{entry.scheduler}_{kind}")
    label = f"{entry.name} {'MoE' if is_moe else 'dense'}"
    capacity = Band(cap.error_band_pct, cap.error_band_reason)
    return serving_band_rule(capacity, cal.value if cal is not None else None, label)
