"""The sweep's output records: one flat row per config, plus its curves.

These are the contract between the sweep and the site: pages, charts and the
JSON API are rendered from them and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

# Ids may not contain this separator (catalog/schema.py enforces it), so a
# config id splits back into its parts unambiguously.
SEP = "--"


def context_label(tokens: int) -> str:
    """Short, stable label for a context length: 8192 -> '8k', 131072 -> '128k'."""
    return f"{tokens // 1024}k" if tokens % 1024 == 0 else str(tokens)


def config_id(device: str, model: str, quant: str, context: int, kv_dtype: str = "auto") -> str:
    """Stable, readable id of one config, e.g. ``rtx-4090--llama-3.1-8b--q4_k_m--8k``."""
    base = SEP.join((device, model, quant, context_label(context)))
    return base if kv_dtype == "auto" else f"{base}{SEP}kv-{kv_dtype}"


def permalink(device: str, model: str, quant: str, context: int, kv_dtype: str = "auto") -> str:
    """Site path of a config page; kept forever once published."""
    tail = "" if kv_dtype == "auto" else f"kv-{kv_dtype}/"
    return f"gpu/{device}/{model}/{quant}/{context_label(context)}/{tail}"


@dataclass(frozen=True, slots=True)
class ResultRow:
    """One config: capacity, ceilings, breaking points with bands, verdict.

    Rates are requests per second; ``*_low`` / ``*_high`` apply the error band.
    Breaking points are None when the config does not fit, or when the load
    grid never reaches them.
    """

    config_id: str
    permalink: str
    gpu: str
    gpu_count: int
    model: str
    quant: str
    runtime: str
    kv_dtype: str
    context: int
    fits: bool
    slots: int
    shortfall_bytes: int
    memory_bytes: int
    usable_memory_bytes: int
    weights_bytes: int
    overhead_bytes: int
    kv_budget_bytes: int
    kv_bytes_per_token: int
    kv_bytes_per_request: int
    kv_capacity_tokens: int
    kv_basis: str
    total_params: int
    active_params: int
    decode_tokens_per_s: float | None
    prefill_tokens_per_s: float | None
    bandwidth_concurrency: int | None
    binding_ceiling: str | None
    effective_concurrency: int
    mean_service_s: float | None
    saturation_rps: float | None
    saturation_rps_low: float | None
    saturation_rps_high: float | None
    shed_onset_rps: float | None
    shed_onset_rps_low: float | None
    shed_onset_rps_high: float | None
    p99_break_rps: float | None
    p99_break_rps_low: float | None
    p99_break_rps_high: float | None
    ttft_break_rps: float | None
    ttft_break_rps_low: float | None
    ttft_break_rps_high: float | None
    soak_break_rps: float | None
    soak_break_rps_low: float | None
    soak_break_rps_high: float | None
    soak_ok_at_85: bool | None
    error_band_pct: int
    error_band_reason: str
    bottleneck: str
    verdict: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class Curves:
    """Per-config series for the charts.

    ``load_*`` arrays share the offered-load grid; ``timeline_*`` arrays are the
    per-tick run at the breaking point (``timeline_rps``).
    """

    config_id: str
    load_rps: tuple[float, ...]
    p50_ms: tuple[float, ...]
    p99_ms: tuple[float, ...]
    ttft_ms: tuple[float, ...]
    slot_occupancy: tuple[float, ...]
    goodput_rps: tuple[float, ...]
    shed_share: tuple[float, ...]
    timeline_rps: float | None
    timeline_s: tuple[float, ...]
    timeline_queue_depth: tuple[float, ...]
    timeline_ttft_ms: tuple[float, ...]
    timeline_error_budget: tuple[float, ...]
