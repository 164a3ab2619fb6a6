"""Turn catalog entries into the engine's plain inputs and run the capacity engine."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TypeVar

from backpressure.catalog.loader import Catalog, load_catalog
from backpressure.catalog.schema import Gpu, KvDtype, Quant
from backpressure.catalog.schema import Runtime as RuntimeEntry
from backpressure.engine.arch import ModelArch
from backpressure.engine.capacity import estimate
from backpressure.engine.inputs import Constants, Device, Runtime, WeightFormat
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


def lookup(table: dict[str, T], kind: str, wanted: str) -> T:
    """Fetch ``wanted`` from ``table`` or raise with the nearest ids."""
    if wanted in table:
        return table[wanted]
    raise LookupError_(kind, wanted, list(table))


def constants(cat: Catalog) -> Constants:
    """Calibration constants from catalog/calibration.yaml."""
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
    )


def device_from_gpu(gpu: Gpu, count: int = 1, interconnect: str | None = None) -> Device:
    """Engine device for a catalog GPU (or ``count`` of them)."""
    platform = "cpu" if gpu.memory_kind == "system" else gpu.vendor
    return Device(
        name=gpu.name if count == 1 else f"{count}x {gpu.name}",
        memory_kind=gpu.memory_kind,
        platform=platform,  # type: ignore[arg-type]
        memory_bytes=gpu.memory_bytes,
        bandwidth_bytes_per_s=gpu.bandwidth_bytes_per_s,
        bf16_flops_per_s=gpu.bf16_flops_per_s,
        fp8_flops_per_s=gpu.fp8_flops_per_s,
        usable_memory_fraction=gpu.usable_memory_fraction,
        count=count,
        interconnect=interconnect,  # type: ignore[arg-type]
    )


def device_for(cat: Catalog, device_id: str) -> Device:
    """A GPU or a rig by id."""
    if device_id in cat.rigs:
        rig = cat.rigs[device_id]
        return device_from_gpu(cat.gpus[rig.gpu], rig.count, rig.interconnect)
    return device_from_gpu(lookup({**cat.gpus, **cat.rigs}, "GPU", device_id))


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
        version=entry.version or "",
        v1_since=entry.v1_since or "",
        cudagraph_counted_since=entry.cudagraph_counted_since or "",
        cudagraph_bytes_per_gpu=entry.cudagraph_bytes_per_gpu or 0,
        visible_memory_fraction=entry.visible_memory_fraction or 1.0,
        block_tokens=entry.block_tokens or 16,
        n_ubatch=entry.n_ubatch or 512,
        mxfp4_hidden_align=entry.mxfp4_hidden_align or 0,
        mxfp4_intermediate_align=entry.mxfp4_intermediate_align or 0,
    )


def weight_format(quant: Quant) -> WeightFormat:
    """Engine weight format for a catalog quant."""
    return WeightFormat(
        name=quant.name,
        bits_per_weight=quant.bits_per_weight,
        embedding_bits=quant.embedding_bits_per_weight,
        fp8_compute=quant.format == "fp8",
        experts_only=quant.format == "mxfp4",
    )


def kv_bytes(kv: KvDtype) -> float:
    """Bytes per cached element; 'auto' is the 2-byte activation dtype."""
    return kv.bytes_per_element if kv.bytes_per_element is not None else AUTO_KV_BYTES


def model_arch(cat: Catalog, model: str) -> tuple[str, ModelArch]:
    """Find a model by catalog id or Hugging Face repo id."""
    by_repo = {m.hf_repo.lower(): mid for mid, m in cat.models.items()}
    mid = by_repo.get(model.lower(), model)
    if mid not in cat.models and "/" in model:
        err = LookupError_("model", model, [m.hf_repo for m in cat.models.values()])
        err.message += "; for a model outside the catalog pass its config.json with --model-config"
        raise err
    lookup(cat.models, "model", mid)
    return mid, cat.archs[mid]


def default_runtime(cat: Catalog, quant: Quant, memory_kind: str = "discrete") -> str:
    """The quant's most preferred runtime that serves this kind of memory."""
    for rid in quant.runtimes:
        if rid in cat.runtimes and memory_kind in cat.runtimes[rid].memory_kinds:
            return rid
    return quant.runtimes[0]


@dataclass(frozen=True, slots=True)
class Request:
    """One config to cost, by catalog ids (or a bare parameter count)."""

    gpu: str
    quant: str
    context: int
    model: str | None = None
    params_b: float | None = None
    runtime: str | None = None
    kv_dtype: str = "auto"


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
    """Cost a config named by catalog ids; ``params_b`` stands in for an unknown model."""
    cat = cat or load_catalog()
    q = lookup(cat.quants, "quant", quant)
    dev = device_for(cat, gpu)
    rt_id = runtime or default_runtime(cat, q, dev.memory_kind)
    rt = lookup(cat.runtimes, "runtime", rt_id)
    kv = lookup(cat.kv_dtypes, "KV dtype", kv_dtype)
    arch = model_arch(cat, model)[1] if model is not None else None
    params = round(params_b * 1e9) if params_b is not None else None
    return estimate(
        dev,
        runtime_profile(rt),
        weight_format(q),
        constants(cat),
        context,
        kv_bytes(kv),
        arch=arch,
        params=params,
    )


class ComboError(ValueError):
    """A runtime that cannot serve the quant, KV dtype or device asked for."""


def check_combo(cat: Catalog, quant: str, runtime_id: str, kv_dtype: str, memory_kind: str) -> None:
    """Raise ComboError unless the runtime serves this quant, KV dtype and memory kind."""
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
