"""Sweep-shaped fixture data for the site: real capacity numbers, synthetic curves.

The capacity fields come from the engine (so the worked arithmetic on a config
page is the engine's own); the load curves and breaking points are a smooth
M/M/c-flavoured stand-in for the simulation, good enough to draw and link.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Iterable, Iterator
from pathlib import Path

from backpressure.catalog.loader import Catalog, load_catalog
from backpressure.engine.results import CapacityResult
from backpressure.generator import manifest, resolve
from backpressure.generator.records import Curves, ResultRow, config_id, permalink
from backpressure.generator.results_io import CURVES, RESULTS, curves_jsonl, results_csv

# (device, model, quant, context): fits and does-not-fit, KV- and bandwidth-bound,
# a rig, unified memory, a CPU host, an MoE model, a 4k/8k pair for "nearest fit".
COMBOS: tuple[tuple[str, str, str, int], ...] = (
    ("rtx-4090", "llama-3.1-8b", "q4_k_m", 8192),
    ("rtx-4090", "llama-3.1-8b", "q4_k_m", 32768),
    ("rtx-4090", "llama-3.1-8b", "q8_0", 8192),
    ("rtx-4090", "llama-3.1-8b", "f16", 131072),
    ("rtx-4090", "llama-3.3-70b", "q4_k_m", 8192),
    ("rtx-4090", "llama-3.3-70b", "q2_k", 8192),
    ("2x-rtx-4090", "llama-3.3-70b", "q4_k_m", 8192),
    ("h100-sxm", "llama-3.1-8b", "fp8", 8192),
    ("h100-sxm", "mixtral-8x7b", "fp8", 32768),
    ("m2-ultra-192gb", "mixtral-8x7b", "q4_k_m", 8192),
    ("epyc-9654-768gb", "llama-3.1-8b", "q4_k_m", 4096),
)
# Every config's load grid: offered rps from 5 % to 400 % of saturation.
GRID_POINTS = 24
TIMELINE_TICKS = 60
OUTPUT_TOKENS = 256
P99_SLO_MS = 2000.0
TTFT_BUDGET_MS = 1500.0


def _shortfall(r: CapacityResult) -> int:
    return 0 if r.fits else r.kv_bytes_per_request - r.kv_budget_bytes


def _banded(value: float | None, pct: int) -> tuple[float | None, float | None, float | None]:
    if value is None:
        return None, None, None
    return value, value * (1 - pct / 100), value * (1 + pct / 100)


def _service_s(r: CapacityResult) -> float | None:
    if not r.fits:
        return None
    per_stream = max(10.0, (r.decode_tokens_per_s or 20.0) / max(1, r.effective_concurrency) ** 0.5)
    return OUTPUT_TOKENS / per_stream


def _row(cat: Catalog, device: str, model: str, quant: str, context: int) -> ResultRow:
    r = resolve.capacity_for(device, quant, context, model=model, cat=cat)
    q = cat.quants[quant]
    kind = resolve.device_for(cat, device).memory_kind
    runtime = resolve.default_runtime(cat, q, kind)
    count = cat.rigs[device].count if device in cat.rigs else 1
    service = _service_s(r)
    sat = r.effective_concurrency / service if service else None
    # The 8B on a 4090 at 32k is the "grid never reaches the p99 break" case.
    never = (device, model, context) == ("rtx-4090", "llama-3.1-8b", 32768)
    p99 = None if (sat is None or never) else sat * 0.92
    ttft = None if (sat is None or never) else sat * 0.97
    shed = None if sat is None else sat * 1.04
    soak = _banded(None if sat is None else sat * 0.85, r.error_band_pct)
    cid = config_id(device, model, quant, context)
    bind = r.binding_ceiling
    bottleneck = (
        "does not fit: the weights leave no room for one request's KV cache"
        if not r.fits
        else f"{'KV slots' if bind == 'kv' else 'decode bandwidth'} saturate at "
        f"{sat:.2f} rps; the queue sheds from {shed:.2f} rps"
    )
    verdict = (
        f"does not fit: {_shortfall(r) / 2**30:.2f} GiB short of one {context:,}-token request"
        if not r.fits
        else f"fits: {r.effective_concurrency} concurrent requests (±{r.error_band_pct} %)"
    )
    values = dict(
        config_id=cid,
        permalink=permalink(device, model, quant, context),
        gpu=device,
        gpu_count=count,
        model=model,
        quant=quant,
        runtime=runtime,
        kv_dtype="auto",
        context=context,
        fits=r.fits,
        slots=r.slots,
        shortfall_bytes=_shortfall(r),
        memory_bytes=r.memory_bytes,
        usable_memory_bytes=r.usable_memory_bytes,
        weights_bytes=r.weights_bytes,
        overhead_bytes=r.overhead_bytes,
        kv_budget_bytes=r.kv_budget_bytes,
        kv_bytes_per_token=r.kv_bytes_per_token,
        kv_bytes_per_request=r.kv_bytes_per_request,
        kv_capacity_tokens=r.kv_capacity_tokens,
        kv_basis=r.kv_basis,
        total_params=r.total_params,
        active_params=r.active_params,
        decode_tokens_per_s=r.decode_tokens_per_s,
        prefill_tokens_per_s=r.prefill_tokens_per_s,
        bandwidth_concurrency=r.bandwidth_concurrency,
        binding_ceiling=bind,
        effective_concurrency=r.effective_concurrency,
        mean_service_s=service,
        saturation_rps=sat,
        saturation_rps_low=_banded(sat, r.error_band_pct)[1],
        saturation_rps_high=_banded(sat, r.error_band_pct)[2],
        shed_onset_rps=shed,
        shed_onset_rps_low=_banded(shed, r.error_band_pct)[1],
        shed_onset_rps_high=_banded(shed, r.error_band_pct)[2],
        p99_break_rps=p99,
        p99_break_rps_low=_banded(p99, r.error_band_pct)[1],
        p99_break_rps_high=_banded(p99, r.error_band_pct)[2],
        ttft_break_rps=ttft,
        ttft_break_rps_low=_banded(ttft, r.error_band_pct)[1],
        ttft_break_rps_high=_banded(ttft, r.error_band_pct)[2],
        soak_ok_at_85=None if sat is None else r.effective_concurrency >= 8,
        error_band_pct=r.error_band_pct,
        error_band_reason=r.error_band_reason,
        bottleneck=bottleneck,
        verdict=verdict,
        fingerprint=hashlib.sha256(cid.encode()).hexdigest()[:16],
        soak_break_rps=soak[0],
        soak_break_rps_low=soak[1],
        soak_break_rps_high=soak[2],
    )
    # Fields the contract grows later default to None, so the fixture keeps working.
    return ResultRow(**{f.name: values.get(f.name) for f in dataclasses.fields(ResultRow)})


def _curves(row: ResultRow) -> Curves:
    if row.saturation_rps is None or row.mean_service_s is None:
        return Curves(row.config_id, (), (), (), (), (), (), (), None, (), (), (), ())
    sat, svc = row.saturation_rps, row.mean_service_s * 1000
    load = tuple(sat * 0.05 * (80 ** (i / (GRID_POINTS - 1))) for i in range(GRID_POINTS))
    util = [min(x / sat, 0.985) for x in load]
    p50 = tuple(svc * (1 + 0.3 * u / (1 - u)) for u in util)
    p99 = tuple(svc * (1.6 + 1.2 * u / (1 - u)) for u in util)
    ttft = tuple(40 + 25 * u / (1 - u) * math.log2(1 + row.slots) for u in util)
    occ = tuple(min(1.0, x / sat) for x in load)
    shed = tuple(max(0.0, 1 - sat / x) for x in load)
    good = tuple(x * (1 - s) for x, s in zip(load, shed, strict=True))
    at = row.p99_break_rps or sat
    ts = tuple(float(t) for t in range(TIMELINE_TICKS))
    depth = tuple(row.slots * 0.4 * (1 - math.exp(-t / 12)) for t in ts)
    t_ttft = tuple(40 + d * 30 for d in depth)
    budget = tuple(max(0.0, 1 - 0.012 * t) for t in ts)
    return Curves(
        row.config_id, load, p50, p99, ttft, occ, good, shed, at, ts, depth, t_ttft, budget
    )


def make_rows(
    combos: Iterable[tuple[str, str, str, int]] = COMBOS, cat: Catalog | None = None
) -> list[ResultRow]:
    """Result rows for ``combos`` (device, model, quant, context)."""
    cat = cat or load_catalog()
    return [_row(cat, *combo) for combo in combos]


def write_fixture(
    out_dir: Path, combos: Iterable[tuple[str, str, str, int]] = COMBOS, cat: Catalog | None = None
) -> list[ResultRow]:
    """Write ``results.csv`` and ``curves.jsonl`` for ``combos`` into ``out_dir``."""
    rows = make_rows(combos, cat)
    write_sweep(out_dir, rows, [_curves(r) for r in rows])
    return rows


def write_sweep(out_dir: Path, rows: Iterable[ResultRow], curves: Iterable[Curves]) -> None:
    """Write a sweep's tables as the sweep does: one unit, with its manifest."""
    manifest.commit(out_dir, {RESULTS: results_csv(rows), CURVES: curves_jsonl(curves)})


def all_combos(cat: Catalog, limit: int | None = None) -> Iterator[tuple[str, str, str, int]]:
    """Every device x model x servable quant x context, as the full sweep would see it."""
    n = 0
    for device in cat.devices():
        kind = resolve.device_for(cat, device).memory_kind
        for mid, arch in cat.archs.items():
            for qid, q in cat.quants.items():
                rt = resolve.default_runtime(cat, q, kind)
                if kind not in cat.runtimes[rt].memory_kinds:
                    continue
                for ctx in sorted({min(c, arch.max_context) for c in cat.settings.contexts}):
                    if limit is not None and n >= limit:
                        return
                    n += 1
                    yield device, mid, qid, ctx
