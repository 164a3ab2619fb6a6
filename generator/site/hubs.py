"""What the hub pages say: home, GPU and model indexes, one page per GPU and per model."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from backpressure.catalog.loader import Catalog
from backpressure.engine.kv import (
    kv_bytes_per_token,
    kv_bytes_per_token_heuristic,
    state_bytes_per_request,
)
from backpressure.engine.units import MIB
from backpressure.generator.records import ResultRow, context_label
from backpressure.generator.resolve import AUTO_KV_BYTES
from backpressure.generator.site.links import row_url
from backpressure.generator.site.pages import arch_source, device_name, names

HEADLINE_MODELS = ("llama-3.1-8b", "mistral-small-24b", "qwen2.5-32b", "llama-3.3-70b")
HEADLINE_QUANT = "q4_k_m"
HEADLINE_CONTEXT = 8192


@dataclass(frozen=True, slots=True)
class Cell:
    """One config as a compact table cell: the breaking rate and its rule, or why none.

    ``status`` is ``rate`` (a breaking rate), ``any`` (fails at any load),
    ``slow`` (too slow to use), ``none`` (not simulated) or ``nofit``.
    """

    url: str
    fits: bool
    status: str
    held: int
    binding: str
    break_rps: float | None
    rule: str
    band_pct: int
    short_bytes: int


BOUND_LABELS = {"kv": "KV", "seqs": "seqs", "bandwidth": "BW", "compute": "FLOPs", "host": "host"}
RULE_SHORT = {"ttft": "TTFT", "p99": "p99", "error_budget": "shed", "soak": "soak"}


def status(row: ResultRow) -> str:
    """Which kind of cell a row is."""
    if not row.fits:
        return "nofit"
    if row.usable is False:
        return "slow"
    if row.fails_at_any_load:
        return "any"
    return "rate" if row.breaking_rps is not None else "none"


def cell(row: ResultRow, root: str) -> Cell:
    """A row as a linked table cell via ``root``: to its page, or to its anchored row."""
    return Cell(
        root + row_url(row),
        row.fits,
        status(row),
        row.max_concurrency or 0,
        BOUND_LABELS.get(row.saturation_bound or "", "?"),
        row.breaking_rps,
        RULE_SHORT.get(row.breaking_rule or "", ""),
        row.serving_band_pct or row.error_band_pct,
        row.shortfall_bytes,
    )


def _grid(rows: Iterable[ResultRow], root: str, group: str) -> list[dict[str, Any]]:
    """Rows grouped by ``group`` (gpu or model), then quant (table rows), then context (columns)."""
    sections: dict[str, dict[str, dict[int, Cell]]] = {}
    for r in rows:
        label = r.quant if r.kv_dtype == "auto" else f"{r.quant} (KV {r.kv_dtype})"
        sections.setdefault(getattr(r, group), {}).setdefault(label, {})[r.context] = cell(r, root)
    # A section's anchor is its id with dots as dashes (ids are URL-safe already).
    return [{"key": k, "anchor": k.replace(".", "-"), "quants": v} for k, v in sections.items()]


def contexts_of(rows: Iterable[ResultRow]) -> list[int]:
    """Sorted distinct contexts of ``rows``."""
    return sorted({r.context for r in rows})


def _sources(entity: Any, fields: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    return [
        {"label": label, "value": value, "source": entity.sources.get(field, "")}
        for field, label in fields
        if getattr(entity, field, None) is not None
        for value in [_show(field, getattr(entity, field))]
    ]


def _show(field: str, value: Any) -> str:
    if field.endswith("memory_bytes"):
        return f"{value / 1024**3:,.0f} GiB"
    if field.endswith("bytes_per_s"):
        return f"{value / 1e9:,.0f} GB/s"
    if field.endswith("flops_per_s"):
        return f"{value / 1e12:,.1f} TFLOP/s"
    if field.endswith("fraction"):
        return f"{value:.0%}"
    return str(value)


GPU_FIELDS = (
    ("memory_bytes", "memory"),
    ("bandwidth_bytes_per_s", "memory bandwidth"),
    ("bf16_flops_per_s", "BF16 dense"),
    ("fp8_flops_per_s", "FP8 dense"),
    ("usable_memory_fraction", "usable by the GPU"),
)
RIG_FIELDS = (("count", "GPUs"), ("interconnect_bandwidth_bytes_per_s", "link bandwidth per GPU"))


def gpu_context(
    cat: Catalog, device: str, rows: list[ResultRow], with_pages: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The GPU (or rig) hub page: specs with sources, every model x quant x context."""
    rig = cat.rigs.get(device)
    gpu = cat.gpus.get(rig.gpu if rig else device)
    specs = _sources(rig, RIG_FIELDS) if rig else []
    specs += _sources(gpu, GPU_FIELDS) if gpu else []
    sections = _grid(rows, "../../", "model")
    for s in sections:
        s["name"] = cat.models[s["key"]].name if s["key"] in cat.models else s["key"]
    return {
        "id": device,
        "name": device_name(cat, device),
        "rig": rig,
        "gpu": gpu,
        "base_page": rig is not None and rig.gpu in with_pages,
        "specs": specs,
        "notes": (rig.notes if rig else None) or (gpu.notes if gpu else None),
        "contexts": contexts_of(rows),
        "sections": sections,
        "root": "../../",
        "fits": sum(r.fits for r in rows),
        "total": len(rows),
    }


def model_facts(cat: Catalog, model: str) -> dict[str, Any]:
    """Architecture, parameters, and the exact KV cost next to the heuristic's."""
    arch = cat.archs[model]
    exact = kv_bytes_per_token(arch.attention, AUTO_KV_BYTES)
    mib = cat.calibration["kv_heuristic_mib_per_billion"].value
    heur = kv_bytes_per_token_heuristic(arch.total_params, mib)
    a = arch.attention
    windows = sorted({w for w in a.window_per_layer if w})
    return {
        "layers": arch.num_layers,
        "hidden": arch.hidden_size,
        "heads": a.num_heads,
        "kv_heads": a.num_kv_heads,
        "head_dim": a.head_dim,
        "mla": a.mla_latent_dim,
        "windows": windows,
        "window_layers": sum(1 for w in a.window_per_layer if w),
        "kv_layers": len(a.window_per_layer),
        "recurrent": arch.recurrent,
        # per sequence, whatever its length: vLLM keeps the model dtype, llama.cpp float32
        "state_mib": state_bytes_per_request(arch, AUTO_KV_BYTES) / MIB,
        "state_mib_f32": state_bytes_per_request(arch, 4) / MIB,
        "experts": arch.experts,
        "max_context": arch.max_context,
        "total": arch.total_params,
        "active": arch.active_params,
        "kv_exact": exact,
        "kv_heuristic": heur,
        "kv_ratio": heur / exact if exact else 0.0,
        "mib_per_billion": mib,
    }


def model_context(cat: Catalog, model: str, rows: list[ResultRow]) -> dict[str, Any]:
    """The model hub page: architecture and every device x quant x context."""
    m = cat.models[model]
    sections = _grid(rows, "../../", "gpu")
    for s in sections:
        s["name"] = device_name(cat, s["key"])
    return {
        "id": model,
        "model": m,
        "facts": model_facts(cat, model),
        "config_label": arch_source(m.sources["config"]),
        "contexts": contexts_of(rows),
        "sections": sections,
        "root": "../../",
        "search_terms": " ".join(p for p in model.replace("_", "-").split("-") if p),
    }


def headline(cat: Catalog, rows: list[ResultRow]) -> dict[str, Any]:
    """Home-page table: every device against a few well-known models at one quant and context."""
    quants = {r.quant for r in rows}
    quant = HEADLINE_QUANT if HEADLINE_QUANT in quants else min(quants, default="")
    ctxs = contexts_of(rows)
    ctx = HEADLINE_CONTEXT if HEADLINE_CONTEXT in ctxs else (ctxs[len(ctxs) // 2] if ctxs else 0)
    present = {r.model for r in rows}
    models = [m for m in HEADLINE_MODELS if m in present] or sorted(present)[:4]
    pick = {
        (r.gpu, r.model): r
        for r in rows
        if r.quant == quant and r.context == ctx and r.kv_dtype == "auto" and r.model in models
    }
    devices = [d for d in cat.devices() if any((d, m) in pick for m in models)]
    devices.sort(key=lambda d: _by_rate(pick, d, models))
    return {
        "quant": cat.quants[quant].name if quant in cat.quants else quant,
        "context": context_label(ctx),
        "models": [{"id": m, "name": cat.models[m].name if m in cat.models else m} for m in models],
        "rows": [
            {
                "id": d,
                "name": device_name(cat, d),
                "cells": [cell(pick[(d, m)], "") if (d, m) in pick else None for m in models],
            }
            for d in devices
        ],
    }


def _by_rate(pick: dict[tuple[str, str], ResultRow], device: str, models: list[str]) -> list[float]:
    """A home-table row's sort key: each model's rate (low end of its band), blanks last."""
    key = []
    for m in models:
        r = pick.get((device, m))
        low = r.breaking_rps_low if r is not None else None
        key.append(-low if low is not None else math.inf)
    return key


def gpu_index(cat: Catalog, by_gpu: dict[str, list[ResultRow]]) -> list[dict[str, Any]]:
    """One line per device that has results."""
    out = []
    for d in cat.devices():
        if d not in by_gpu:
            continue
        rig = cat.rigs.get(d)
        gpu = cat.gpus[rig.gpu] if rig else cat.gpus[d]
        count = rig.count if rig else 1
        out.append(
            {
                "id": d,
                "name": device_name(cat, d),
                "kind": gpu.memory_kind,
                "memory": f"{count * gpu.memory_bytes / 1024**3:,.0f} GiB",
                "bandwidth": f"{gpu.bandwidth_bytes_per_s / 1e9:,.0f} GB/s",
                "fits": sum(r.fits for r in by_gpu[d]),
                "total": len(by_gpu[d]),
            }
        )
    return out


def model_index(cat: Catalog, by_model: dict[str, list[ResultRow]]) -> list[dict[str, Any]]:
    """One line per model that has results."""
    return [
        {
            "id": mid,
            "name": m.name,
            "family": m.family,
            "facts": model_facts(cat, mid),
            "fits": sum(r.fits for r in by_model[mid]),
            "total": len(by_model[mid]),
        }
        for mid, m in cat.models.items()
        if mid in by_model
    ]


def home_context(cat: Catalog, rows: list[ResultRow]) -> dict[str, Any]:
    """The home page: counts and the headline table."""
    example = next((r for r in rows if r.fits and r.model == "llama-3.1-8b"), None)
    example = example or next((r for r in rows if r.fits), None)
    return {
        "root": "",
        "configs": len(rows),
        "fits": sum(r.fits for r in rows),
        "devices": len({r.gpu for r in rows}),
        "models": len({r.model for r in rows}),
        "headline": headline(cat, rows),
        "example": example,
        "example_names": names(cat, example) if example else None,
    }
