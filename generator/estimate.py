"""Plain functions behind ``backpressure estimate`` and ``backpressure catalog``."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from backpressure.catalog.errors import safe_repr
from backpressure.catalog.hf_config import ConfigError, parse_config, read_config_json
from backpressure.catalog.loader import Catalog
from backpressure.catalog.schema import Gpu
from backpressure.engine.arch import ModelArch
from backpressure.engine.capacity import backend_of, platform_of
from backpressure.engine.inputs import Device, Runtime
from backpressure.engine.results import CapacityResult
from backpressure.engine.units import GB, GIB
from backpressure.generator import resolve
from backpressure.generator.serve_once import Load, ServingError, serve_config


class UserError(Exception):
    """A bad request from the user; the message is one clear line."""


@dataclass(frozen=True, slots=True)
class AdHocDevice:
    """A device described on the command line instead of by catalog id."""

    vram_gb: float
    bandwidth_gbps: float | None
    tflops: float | None
    memory_kind: str


@dataclass(frozen=True, slots=True)
class EstimateArgs:
    """Everything ``estimate`` was asked, already parsed by click."""

    gpu: str | None
    adhoc: AdHocDevice | None
    model: str | None
    model_config: Path | None
    params_b: float | None
    quant: str
    context: int
    gpus: int
    runtime: str | None
    gpu_memory_utilization: float | None
    kv_dtype: str
    overhead_gb: float | None
    load: Load | None = None
    backend: str | None = None


@dataclass(frozen=True, slots=True)
class Estimate:
    """A capacity result with the names of what was costed."""

    device: str
    model: str
    quant: str
    bits_per_weight: float
    runtime: str
    kv_dtype: str
    result: CapacityResult
    serving: dict[str, Any] | None
    # the calibration it was costed with, as the report prints it
    min_stream_tokens_per_s: float
    kv_heuristic: float
    # the GPU backend whose decode constants were used, and whether the
    # platform has more than one (then the report names it)
    backend: str = ""
    backend_choice: bool = False


def _usable_fraction_default(cat: Catalog, kind: str) -> float | None:
    """Median usable share of the catalog's devices of this memory kind."""
    shares = sorted(
        g.usable_memory_fraction
        for g in cat.gpus.values()
        if g.memory_kind == kind and g.usable_memory_fraction is not None
    )
    return shares[len(shares) // 2] if shares else None


def _canonical(cat: Catalog, args: EstimateArgs) -> EstimateArgs:
    """``args`` with every catalog id as the catalog spells it (ids match in any case)."""
    devices = {**cat.gpus, **cat.rigs}
    return dataclasses.replace(
        args,
        gpu=None if args.gpu is None else resolve.canonical_id(devices, "GPU", args.gpu),
        quant=resolve.canonical_id(cat.quants, "quant", args.quant),
        runtime=None
        if args.runtime is None
        else resolve.canonical_id(cat.runtimes, "runtime", args.runtime),
        kv_dtype=resolve.canonical_id(cat.kv_dtypes, "KV dtype", args.kv_dtype),
    )


def _check_gpus(cat: Catalog, args: EstimateArgs) -> None:
    """Refuse a GPU count that names no rig anyone can build."""
    if args.gpus == 1:
        return
    if args.gpu in cat.rigs:
        rig = cat.rigs[args.gpu]
        raise UserError(
            f"--gpus: {args.gpu} is a rig of {rig.count} GPUs already; drop --gpus "
            f"or give the GPU ({rig.gpu})"
        )
    kind = (
        args.adhoc.memory_kind if args.adhoc is not None else cat.gpus[args.gpu or ""].memory_kind
    )
    if kind != "discrete":
        what = "Apple machines (unified memory)" if kind == "unified" else "CPU hosts"
        raise UserError(f"--gpus: {args.gpus} {what} do not pool their memory; use --gpus 1")


def _check_split(
    device: Device, profile: Runtime, rt_id: str, arch: ModelArch | None, model: str
) -> None:
    """Tensor parallelism shards attention heads evenly: the GPU count must divide them."""
    if device.count == 1 or profile.multi_gpu != "tensor-parallel" or arch is None:
        return
    heads = arch.attention.num_heads
    if heads % device.count:
        fits = [n for n in range(2, heads + 1) if heads % n == 0 and n <= 64][:6]
        raise UserError(
            f"--gpus: {device.count} GPUs do not divide the {heads} attention heads of "
            f"{model} under {rt_id}'s tensor parallelism (try {', '.join(map(str, fits))})"
        )


def _device(cat: Catalog, args: EstimateArgs) -> Device:
    if args.adhoc is None:
        dev = resolve.device_for(cat, args.gpu or "")
        if args.gpus > 1:
            return resolve.device_from_gpu(cat.gpus[args.gpu or ""], args.gpus, "pcie")
        return dev
    a = args.adhoc
    fraction = None if a.memory_kind == "discrete" else _usable_fraction_default(cat, a.memory_kind)
    return Device(
        name=f"{a.vram_gb:g} GB {a.memory_kind} device",
        memory_kind=a.memory_kind,  # type: ignore[arg-type]
        platform="cpu"
        if a.memory_kind == "system"
        else ("apple" if a.memory_kind == "unified" else "nvidia"),
        memory_bytes=round(a.vram_gb * GIB),
        bandwidth_bytes_per_s=round(a.bandwidth_gbps * GB) if a.bandwidth_gbps else None,
        bf16_flops_per_s=round(a.tflops * 1e12) if a.tflops else None,
        usable_memory_fraction=fraction,
        count=args.gpus,
        interconnect="pcie" if args.gpus > 1 else None,
    )


def _model(cat: Catalog, args: EstimateArgs) -> tuple[str, ModelArch | None, int | None]:
    if args.model_config is not None:
        try:
            # bounded in size and depth before anything is parsed into memory
            raw = read_config_json(args.model_config)
            arch = parse_config(raw)
        except ConfigError as exc:
            raise UserError(f"{args.model_config}: {exc}") from exc
        # Without _name_or_path a config.json names only its model_type ("llama"):
        # the file says which model the reader meant.
        if not raw.get("_name_or_path"):
            file = "".join(c if c.isprintable() else "?" for c in args.model_config.name)[:100]
            arch = dataclasses.replace(arch, name=f"{file} ({arch.name})")
        return arch.name, arch, None
    if args.model is not None:
        mid, arch = resolve.model_arch(cat, args.model)
        return mid, arch, None
    assert args.params_b is not None
    return f"{args.params_b:g}B (parameter count only)", None, round(args.params_b * 1e9)


def _runtime(
    cat: Catalog, args: EstimateArgs, device: Device, gpu: Gpu | None
) -> tuple[str, Runtime]:
    quant = resolve.lookup(cat.quants, "quant", args.quant)
    # A --vram-gb device has no generation: only catalog devices meet the support matrix.
    generation = gpu.generation if gpu is not None else None
    rt_id = args.runtime or resolve.default_runtime(cat, quant, device.memory_kind, generation)
    entry = resolve.lookup(cat.runtimes, "runtime", rt_id)
    resolve.check_combo(cat, quant.id, rt_id, args.kv_dtype, device.memory_kind, generation)
    profile = resolve.runtime_profile(entry)
    if args.overhead_gb is not None:
        if profile.style != "fixed-overhead":
            raise UserError(
                f"--overhead-gb: runtime {rt_id} sets its overhead by profiling; "
                "use --gpu-memory-utilization"
            )
        profile = _replace(profile, framework_overhead_bytes=round(args.overhead_gb * GIB))
    if args.gpu_memory_utilization is not None:
        if profile.style != "memory-utilization":
            raise UserError(
                f"--gpu-memory-utilization: runtime {rt_id} has a fixed overhead; use --overhead-gb"
            )
        profile = _replace(profile, gpu_memory_utilization=args.gpu_memory_utilization)
    if args.backend is not None:
        profile = _replace(profile, backends=_backend(cat, args.backend, rt_id, profile, device))
    return rt_id, profile


def _backend(
    cat: Catalog, name: str, rt_id: str, profile: Runtime, device: Device
) -> tuple[tuple[str, str], ...]:
    """The runtime's ``backends`` for ``--backend``: the platform's first, or one fitted apart."""
    platform = platform_of(device)
    first = resolve.FIRST_BACKEND[platform]
    own = resolve.own_backends(cat, platform)
    wanted = name.strip().lower()
    rest = tuple(kv for kv in profile.backends if kv[0] != device.generation)
    if wanted == first:
        return rest
    if wanted not in own:
        known = ", ".join([first, *own])
        raise UserError(
            f"--backend: no calibration for {safe_repr(name)} on {platform} devices; known: {known}"
        )
    if not device.generation:
        raise UserError("--backend: give a catalog --gpu; a --vram-gb device has no generation")
    runs = sorted(g for g, b in (cat.runtimes[rt_id].backends or {}).items() if b == wanted)
    if device.generation not in runs:
        if not runs:
            raise UserError(f"--backend: runtime {rt_id} runs {first} on {platform} devices")
        raise UserError(f"--backend: runtime {rt_id} runs {wanted} only on {', '.join(runs)} GPUs")
    return tuple(sorted((*rest, (device.generation, wanted))))


def _replace(profile: Runtime, **changes: Any) -> Runtime:
    return Runtime(**{**asdict(profile), **changes})


def run_estimate(cat: Catalog, args: EstimateArgs) -> Estimate:
    """Resolve the request against the catalog and cost it."""
    args = _canonical(cat, args)
    _check_gpus(cat, args)
    device = _device(cat, args)
    name, arch, params = _model(cat, args)
    if arch is not None and args.context > arch.max_context:
        raise UserError(
            f"--context: {args.context:,} tokens exceeds the maximum of {safe_repr(name)}, "
            f"{arch.max_context:,} tokens"
        )
    gpu = resolve.gpu_entry(cat, args.gpu) if args.adhoc is None and args.gpu else None
    rt_id, profile = _runtime(cat, args, device, gpu)
    _check_split(device, profile, rt_id, arch, name)
    quant = cat.quants[args.quant]
    kv = resolve.lookup(cat.kv_dtypes, "KV dtype", args.kv_dtype)
    compute = resolve.compute_for(cat, gpu, quant, rt_id) if gpu is not None else None
    if gpu is not None and compute is not None:
        device = resolve.with_compute(device, gpu, compute)
    cfg = resolve.Config(
        device,
        rt_id,
        profile,
        resolve.weight_format(quant, compute),
        resolve.constants(cat),
        args.context,
        resolve.kv_bytes(kv),
        arch,
        params,
    )
    result = cfg.capacity()
    serving = None
    if args.load is not None:
        try:
            serving = serve_config(cat, cfg, result, args.load)
        except ServingError as exc:
            raise UserError(str(exc)) from exc
    c = cfg.constants
    return Estimate(
        device.name,
        name,
        quant.id,
        quant.bits_per_weight,
        rt_id,
        kv.id,
        result,
        serving,
        c.min_stream_tokens_per_s,
        c.kv_heuristic_mib_per_billion,
        *_backend_named(cat, device, profile),
    )


def _backend_named(cat: Catalog, device: Device, profile: Runtime) -> tuple[str, bool]:
    platform = platform_of(device)
    backend = backend_of(device, profile) or resolve.FIRST_BACKEND[platform]
    return backend, bool(resolve.own_backends(cat, platform))


def estimate_json(est: Estimate) -> dict[str, Any]:
    """The ``--json`` object: every result field plus what was costed."""
    return {
        "device": est.device,
        "model": est.model,
        "quant": est.quant,
        "runtime": est.runtime,
        "backend": est.backend,
        "kv_dtype": est.kv_dtype,
        **{k: v for k, v in asdict(est.result).items() if k != "kv_pool"},
        **(est.serving or {}),
    }


def catalog_json(cat: Catalog) -> dict[str, Any]:
    """``catalog --json``: every entity, with the prices and cost settings it carries.

    GPUs and rigs come with their power and dated, sourced prices; ``costs`` holds
    the electricity price and amortisation period of the settings.
    """

    def dump(table: dict[str, Any]) -> list[dict[str, Any]]:
        return [e.model_dump(mode="json", exclude={"config"}) for e in table.values()]

    models = [
        {
            **m.model_dump(mode="json", exclude={"config"}),
            "total_params": cat.archs[mid].total_params,
            "active_params": cat.archs[mid].active_params,
            "max_context": cat.archs[mid].max_context,
        }
        for mid, m in cat.models.items()
    ]
    # A rig is priced and powered per GPU: it carries its GPU's figures, dates and sources.
    per_gpu = ("board_power_w", "board_power_kind", "rental_prices", "purchase_prices")
    rigs = [
        {
            **rig.model_dump(mode="json"),
            "per_gpu": cat.gpus[rig.gpu].model_dump(mode="json", include=set(per_gpu)),
        }
        for rig in cat.rigs.values()
    ]
    return {
        "gpus": dump(cat.gpus),
        "rigs": rigs,
        "costs": cat.settings.model_dump(
            mode="json", include={"electricity", "amortisation_years"}
        ),
        "models": models,
        "quants": dump(cat.quants),
        "kv_dtypes": dump(cat.kv_dtypes),
        "runtimes": dump(cat.runtimes),
    }
