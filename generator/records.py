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
    """One config: capacity, ceilings, serving under load with bands, verdict.

    Capacity (SPEC §2-3): the worst-case slots at full context, the KV budget,
    the analytic decode ceiling. Serving (SPEC §4): the model server simulated
    with its runtime's scheduler for the settings' request profile:
    ``max_concurrency`` requests of that profile it can hold, the closed-loop
    saturation rate, and **the breaking rate** with the rule that fires there.
    Rates are requests per second; ``*_low`` / ``*_high`` apply the serving
    band. Serving fields are None where the config does not fit, is too slow to
    use (``usable`` false) or fails at any load.
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
    bandwidth_slow_batches: str
    binding_ceiling: str | None
    error_band_pct: int
    error_band_reason: str
    usable: bool | None
    max_concurrency: int | None
    reached_concurrency: float | None
    single_stream_tokens_per_s: float | None
    single_ttft_ms: float | None
    saturation_rps: float | None
    saturation_rps_low: float | None
    saturation_rps_high: float | None
    saturation_bound: str | None
    breaking_rps: float | None
    breaking_rps_low: float | None
    breaking_rps_high: float | None
    breaking_rule: str | None
    fails_at_any_load: bool | None
    ttft_break_rps: float | None
    p99_break_rps: float | None
    shed_onset_rps: float | None
    soak_break_rps: float | None
    serving_band_pct: int | None
    serving_band_reason: str | None
    bottleneck: str
    verdict: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class Curves:
    """Per-config series for the charts.

    ``load_*`` share the offered rates of the open-loop runs (latencies in ms,
    None where a lost request makes the percentile infinite); ``users`` and
    ``table_*`` the closed-loop concurrency table; ``timeline_*`` the run at the
    breaking rate (``timeline_rps``), second by second.
    """

    config_id: str
    load_rps: tuple[float, ...]
    ttft_p50_ms: tuple[float | None, ...]
    ttft_p99_ms: tuple[float | None, ...]
    e2e_p99_ms: tuple[float | None, ...]
    goodput_rps: tuple[float, ...]
    lost_share: tuple[float, ...]
    occupancy: tuple[float, ...]
    users: tuple[int, ...]
    table_ttft_ms: tuple[float, ...]
    table_tpot_ms: tuple[float, ...]
    table_tokens_per_user: tuple[float, ...]
    table_output_tps: tuple[float, ...]
    table_requests_per_s: tuple[float, ...]
    table_running: tuple[float, ...]
    timeline_rps: float | None
    timeline_s: tuple[float, ...]
    timeline_queue_depth: tuple[float, ...]
    timeline_occupancy: tuple[float, ...]
    timeline_ttft_p99_ms: tuple[float | None, ...]
    timeline_lost: tuple[float, ...]
