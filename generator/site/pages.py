"""What one config page says, gathered as plain values before anything is rendered."""

from __future__ import annotations

import heapq
import math
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from backpressure.catalog.loader import Catalog
from backpressure.engine.capacity import backend_of
from backpressure.generator import text
from backpressure.generator.records import Curves, ResultRow, context_label
from backpressure.generator.resolve import BACKEND_LABELS, device_for, runtime_profile
from backpressure.generator.text import gib

GIB = 1024**3
NEAREST = 5
PROVENANCE = ("datasheet", "config.json", "calibrated", "assumed")


@dataclass(frozen=True, slots=True)
class Names:
    """Display names for the parts of one config."""

    device: str
    model: str
    quant: str
    runtime: str
    bits: float

    @property
    def title(self) -> str:
        """Page title, e.g. ``NVIDIA GeForce RTX 4090 · Llama 3.1 8B Instruct · GGUF Q4_K_M``."""
        return f"{self.device} · {self.model} · {self.quant}"


def device_name(cat: Catalog, device: str) -> str:
    """A GPU or rig's display name (the id itself if the catalog no longer has it)."""
    entry = cat.gpus.get(device) or cat.rigs.get(device)
    return entry.name if entry is not None else device


def names(cat: Catalog, row: ResultRow) -> Names:
    """Display names of a row's device, model, quant and runtime."""
    quant = cat.quants.get(row.quant)
    model = cat.models.get(row.model)
    return Names(
        device=device_name(cat, row.gpu),
        model=model.name if model else row.model,
        quant=quant.name if quant else row.quant,
        runtime=runtime_label(cat, row.runtime, row.gpu),
        bits=quant.bits_per_weight if quant else 0.0,
    )


def runtime_label(cat: Catalog, runtime_id: str, device: str) -> str:
    """A runtime's display name, with the backend where it is not the platform's first.

    ``llama.cpp (llama-server) on Vulkan`` on a Radeon GPU.
    """
    runtime = cat.runtimes.get(runtime_id)
    if runtime is None:
        return runtime_id
    if device not in cat.gpus and device not in cat.rigs:
        return runtime.name
    # the engine's own rule, so the page names the backend the config was costed on
    backend = backend_of(device_for(cat, device), runtime_profile(runtime))
    return f"{runtime.name} on {BACKEND_LABELS.get(backend, backend)}" if backend else runtime.name


def rel_root(page_dir: str) -> str:
    """Relative prefix from a page directory (``gpu/a/b/``) back to the site root."""
    depth = len([p for p in page_dir.split("/") if p])
    return "../" * depth


def classify(source: str | None) -> str:
    """Provenance label of a catalog source string."""
    text = (source or "").strip().lower()
    if text.startswith("calibrated"):
        return "calibrated"
    if text.startswith("assum") or not text:
        return "assumed"
    return "datasheet"


def _device_sources(cat: Catalog, device: str) -> dict[str, str]:
    rig = cat.rigs.get(device)
    gpu = cat.gpus.get(rig.gpu if rig else device)
    return dict(gpu.sources) if gpu else {}


def arch_source(source: str) -> str:
    """What a model's architecture was read from, as the pages name it.

    A model whose keys were transcribed from elsewhere (its notes say from what)
    does not get its source called config.json.

    >>> arch_source("https://huggingface.co/x/y/blob/main/config.json"), arch_source("https://ollama.com/x")
    ('config.json', 'architecture keys')
    """
    return "config.json" if source.split("?")[0].endswith("config.json") else "architecture keys"


def provenance(cat: Catalog, row: ResultRow) -> dict[str, tuple[str, str]]:
    """Label and source for each figure on the page: (label, source text)."""
    dev = _device_sources(cat, row.gpu)
    model = cat.models.get(row.model)
    runtime = cat.runtimes.get(row.runtime)
    quant = cat.quants.get(row.quant)
    rt_src = ""
    if runtime is not None:
        key = "framework_overhead_bytes" if runtime.style == "fixed-overhead" else "non_torch_bytes"
        rt_src = runtime.sources.get(key, "")
    cfg = model.sources.get("config", "") if model else ""
    exact = row.kv_basis == "exact"
    cal = cat.calibration.get("bandwidth_efficiency_nvidia")
    heuristic = cat.calibration.get("kv_heuristic_mib_per_billion")
    return {
        "memory": ("datasheet", dev.get("memory_bytes", "")),
        "weights": (
            "config.json",
            f"{cfg}; bits: {quant.sources.get('bits_per_weight', '') if quant else ''}",
        ),
        "overhead": (classify(rt_src), rt_src),
        "kv": (
            ("config.json", cfg) if exact else ("assumed", heuristic.source if heuristic else "")
        ),
        "decode": ("calibrated", cal.source if cal else ""),
        "breaking": (
            "calibrated",
            "the runtime's scheduler simulated request by request over the "
            "calibrated step model (benchmarks/serving-report.txt)",
        ),
        "charts": (
            "calibrated",
            "the runtime's scheduler simulated request by request over the calibrated step model",
        ),
    }


def arithmetic(row: ResultRow, n: Names, heuristic_mib: float) -> list[tuple[str, str, str]]:
    """The worked arithmetic as (name, expression, value) rows, in this config's numbers."""
    kv_label = "exact" if row.kv_basis == "exact" else f"{heuristic_mib:g} MiB/B heuristic"
    capped = row.kv_bytes_per_request != row.kv_bytes_per_token * row.context
    budget = f"floor({gib(row.kv_budget_bytes)} / {gib(row.kv_bytes_per_request)})"
    if row.kv_budget_bytes < 0:
        budget = "no KV budget"  # not a floor of a negative size
    return [
        (
            "weights",
            text.weights_expression(row.total_params, row.weights_bytes, n.bits),
            gib(row.weights_bytes),
        ),
        (
            "KV budget",
            f"{gib(row.usable_memory_bytes)} − {gib(row.weights_bytes)} − "
            f"{gib(row.overhead_bytes)} (overhead)",
            text.room(row.kv_budget_bytes),
        ),
        (
            "KV / request",
            f"{row.kv_bytes_per_token:,} B/token × {row.context:,} tokens "
            f"({kv_label}{', sliding windows capped' if capped else ''})",
            gib(row.kv_bytes_per_request),
        ),
        ("slots", budget.replace(" GiB", ""), f"{row.slots:,}"),
    ]


@dataclass(frozen=True, slots=True)
class Limits:
    """The thresholds a page prints, as the build computed with them (catalog settings)."""

    ttft_budget_ms: float
    p99_slo_ms: float
    availability: float
    soak_utilization: float
    soak_s: float
    prompt_tokens: int
    output_tokens: int
    min_usable_tokens_per_s: float
    min_stream_tokens_per_s: float
    probe_requests: int = 300

    @classmethod
    def of(cls, cat: Catalog) -> Limits:
        """The catalog's settings (the p99 SLO derived where unset)."""
        s = cat.settings
        floor = cat.calibration["min_stream_tokens_per_s"].value
        slo = s.p99_slo_ms or s.ttft_budget_ms + 1000.0 * s.output_tokens / floor
        return cls(
            float(s.ttft_budget_ms),
            float(slo),
            s.availability,
            s.soak_utilization,
            float(s.soak_seconds),
            s.prompt_tokens,
            s.output_tokens,
            s.min_usable_tokens_per_s,
            floor,
            s.probe_requests,
        )


RULE_KEYS = {
    "ttft": "ttft_break_rps",
    "p99": "p99_break_rps",
    "error_budget": "shed_onset_rps",
    "soak": "soak_break_rps",
}
RULE_LABELS = {
    "ttft": "TTFT",
    "p99": "p99 latency",
    "error_budget": "error budget (shedding)",
    "soak": "soak",
}


def breaking_points(row: ResultRow, lim: Limits) -> list[dict[str, Any]]:
    """The serving points with their bands; ``value`` is None where not reached.

    The breaking rate itself is bisected; each rule's own rate is interpolated
    between the runs on either side of it.
    """
    seconds = text.seconds
    points = (
        (
            "saturation_rps",
            "Saturation (closed loop)",
            "the most requests per second the server completes, every slot of the profile busy",
        ),
        (
            "shed_onset_rps",
            "The queue starts shedding",
            f"more than {text.share(1 - lim.availability)} of requests lost: the error budget",
        ),
        (
            "ttft_break_rps",
            f"TTFT breaks {seconds(lim.ttft_budget_ms / 1000)}",
            "the 99th percentile of time to first token crosses the budget",
        ),
        (
            "p99_break_rps",
            f"p99 breaks the {seconds(lim.p99_slo_ms / 1000)} SLO",
            "the 99th percentile of end-to-end latency crosses the SLO",
        ),
        (
            "soak_break_rps",
            "The soak fails",
            f"the rationed resource {text.share(lim.soak_utilization)} or more occupied "
            f"over the measured window ({seconds(lim.soak_s)}, shorter at high rates), "
            "or more offered than the saturation rate: the queue would grow without bound",
        ),
    )
    out = []
    pct = row.serving_band_pct or 0
    for key, label, meaning in points:
        value = getattr(row, key)
        out.append(
            {
                "key": key,
                "label": label,
                "meaning": meaning,
                "value": value,
                "low": None if value is None else value * (1 - pct / 100),
                "high": None if value is None else value * (1 + pct / 100),
                "headline": RULE_KEYS.get(row.breaking_rule or "") == key,
            }
        )
    return out


def profile(lim: Limits) -> str:
    """The request profile in words."""
    return (
        f"every request sends {lim.prompt_tokens:,} prompt tokens and asks for "
        f"{lim.output_tokens:,} output tokens"
    )


def concurrency_rows(c: Curves | None) -> list[dict[str, Any]]:
    """The closed-loop table: users, TTFT, TPOT, tokens/s per user and in total."""
    if c is None or not c.users:
        return []
    return [
        {
            "users": u,
            "ttft_ms": ttft,
            "tpot_ms": tpot,
            "per_user": per,
            "total": total,
            "rps": rps,
            "running": run,
        }
        for u, ttft, tpot, per, total, rps, run in zip(
            c.users,
            c.table_ttft_ms,
            c.table_tpot_ms,
            c.table_tokens_per_user,
            c.table_output_tps,
            c.table_requests_per_s,
            c.table_running,
            strict=True,
        )
    ]


def _distance(a: ResultRow, b: ResultRow) -> tuple[int, float, int, str]:
    """Nearness of a fitting config ``b`` to ``a``: same device first, then context, then size."""
    return (
        int(a.gpu != b.gpu),
        abs(math.log2(b.context / a.context)),
        b.memory_bytes,
        b.config_id,
    )


def nearest_fits(row: ResultRow, by_model: dict[str, list[ResultRow]]) -> list[ResultRow]:
    """Up to five fitting configs of the same model, nearest to ``row`` first."""
    return NearestFits(by_model.get(row.model, []))(row)


class NearestFits:
    """:func:`nearest_fits` for many rows: the fitting rows indexed once, not scanned per row."""

    def __init__(self, rows: Iterable[ResultRow]) -> None:
        self.by_device: dict[tuple[str, str], list[ResultRow]] = {}
        self.by_shape: dict[tuple[str, str, int], list[ResultRow]] = {}
        for r in rows:
            if r.fits:
                self.by_device.setdefault((r.model, r.gpu), []).append(r)
                self.by_shape.setdefault((r.model, r.quant, r.context), []).append(r)

    def __call__(self, row: ResultRow) -> list[ResultRow]:
        """Up to five fitting configs of ``row``'s model, nearest first; none if ``row`` fits."""
        if row.fits:
            return []
        # Other devices count only at the same quant and context; on the same device
        # a lighter quant or a shorter context is the nearer change.
        pool = {r.config_id: r for r in self.by_device.get((row.model, row.gpu), [])}
        pool.update(
            (r.config_id, r) for r in self.by_shape.get((row.model, row.quant, row.context), [])
        )
        return heapq.nsmallest(NEAREST, pool.values(), key=lambda r: _distance(row, r))


def config_context(
    cat: Catalog,
    row: ResultRow,
    curves: Curves | None,
    nearest: list[ResultRow],
    chart_data: dict[str, Any],
    lim: Limits,
) -> dict[str, Any]:
    """Everything ``config.html.j2`` renders for one config.

    NOTE: a config page is re-rendered only when its content key changes
    (generator/site_keys.py): its row and curves, the catalog entries the row
    names, its ``nearest`` rows and theirs, the shell, templates and code. Read
    anything else here and it must join that key too.
    """
    n = names(cat, row)
    m = cat.models.get(row.model)
    root = rel_root(row.permalink)
    heuristic = cat.calibration["kv_heuristic_mib_per_billion"].value
    return {
        "row": row,
        "names": n,
        "title": f"{n.title} · {context_label(row.context)} context",
        "root": root,
        "gpu_url": f"{root}gpu/{row.gpu}/",
        "model_url": f"{root}model/{row.model}/",
        "json_url": f"{root}api/models/{row.model}.json",
        "pair_url": f"{root}gpu/{row.gpu}/{row.model}/",
        "badge_url": "badge.svg",
        "permalink": row.permalink,
        "arithmetic": arithmetic(row, n, heuristic),
        "kv_heuristic": f"{heuristic:g}",
        "arch_source": arch_source(m.sources.get("config", "")) if m else "config.json",
        "breaks": breaking_points(row, lim),
        "limits": lim,
        "profile": profile(lim),
        "table": concurrency_rows(curves),
        "rule_label": RULE_LABELS.get(row.breaking_rule or "", ""),
        "prov": provenance(cat, row),
        "nearest": [{"row": r, "url": root + r.permalink, "names": names(cat, r)} for r in nearest],
        "has_curves": bool(chart_data),
        "chart_data": chart_data,
        "keywords": search_keywords(row),
        "rig_url": rig_url(cat, row, root, lim),
    }


def rig_url(cat: Catalog, row: ResultRow, root: str, lim: Limits) -> str:
    """The rig builder with this config loaded: its server under the sweep's settings."""
    from backpressure.generator.rig.links import config_link

    return config_link(root, row, lim, cat.settings)


def search_keywords(row: ResultRow) -> str:
    """Extra words that make a config findable by how people type it (``4090 llama 3.1 8b q4``)."""
    words = [row.gpu, row.model, row.quant, context_label(row.context), f"{row.context}"]
    for ident in (row.gpu, row.model, row.quant):
        words.extend(p for p in ident.replace("_", "-").split("-") if p)
    return " ".join(dict.fromkeys(words))


def page_path(permalink: str) -> str:
    """The HTML file of a directory-style permalink."""
    return posixpath.join(permalink, "index.html")
