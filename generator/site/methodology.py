"""What the methodology page prints: every constant with its source, and the band rule."""

from __future__ import annotations

from typing import Any

from backpressure.catalog.loader import Catalog
from backpressure.engine import bands
from backpressure.generator import text
from backpressure.generator.site.pages import Limits, classify
from backpressure.generator.sweep.combos import swept_quants


def settings_rows(cat: Catalog) -> dict[str, Any]:
    """The sweep's settings as the methodology page prints them (every one from the catalog)."""
    s = cat.settings
    lim = Limits.of(cat)
    vllm = cat.runtimes.get("vllm")
    llama = cat.runtimes.get("llama.cpp")
    sec = text.seconds
    defaults = ""
    if vllm is not None and vllm.max_num_seqs and vllm.large_gpu_memory_bytes:
        defaults = (
            f"{vllm.max_num_seqs:,} sequences and {vllm.max_num_batched_tokens:,} tokens a step, "
            f"{vllm.large_gpu_max_num_seqs:,} and {vllm.large_gpu_max_num_batched_tokens:,} on "
            f"GPUs with {vllm.large_gpu_memory_bytes / 1024**3:,.0f} GiB or more"
            + (
                f" unless their name contains {vllm.small_defaults_name}"
                if vllm.small_defaults_name
                else ""
            )
        )
    intake = cat.calibration.get("request_overhead_s_vllm")
    per_request = intake.value if intake is not None else 0.0
    return {
        "intake": f"{per_request * 1000:g} ms",
        "intake_burst": sec(1000 * per_request),
        "contexts": ", ".join(f"{c:,}" for c in s.contexts),
        "quants": ", ".join(
            q if only is None else f"{q} (as released: {', '.join(sorted(only))})"
            for q, only in swept_quants(cat).items()
        ),
        "prompt": s.prompt_tokens,
        "output": s.output_tokens,
        "ttft": sec(lim.ttft_budget_ms / 1000),
        "slo": sec(lim.p99_slo_ms / 1000),
        "budget": text.share(1 - s.availability),
        "soak_util": text.share(s.soak_utilization),
        "soak_s": sec(s.soak_seconds),
        "floor": f"{s.min_usable_tokens_per_s:g}",
        "floor_reason": s.min_usable_reason,
        "measure": s.measure_requests,
        "probe": s.probe_requests,
        "probe_bracket": f"{s.probe_bracket:g}",
        "seed_ttft": _pct(cat, "serving_seed_pct_ttft"),
        "seed_p99": _pct(cat, "serving_seed_pct_p99"),
        "min_measure": sec(s.min_measure_seconds),
        "warmup": sec(s.warmup_seconds),
        "min_warmup": sec(min(5.0, s.warmup_seconds)),
        "lowest": text.share(s.load_min_fraction),
        "doublings": s.max_load_doublings,
        "tolerance": text.share(s.breaking_tolerance),
        "depth": f"{s.queue_depth_per_slot:g}",
        "max_age": sec(s.queue_max_age_s),
        "seed": s.seed,
        "block": vllm.block_tokens if vllm is not None and vllm.block_tokens else 16,
        "vllm_defaults": defaults,
        "n_batch": llama.n_batch if llama is not None and llama.n_batch else 0,
        "n_ubatch": llama.n_ubatch if llama is not None and llama.n_ubatch else 0,
    }


def _runtime_rows(cat: Catalog) -> list[dict[str, str]]:
    rows = []
    for rid, rt in cat.runtimes.items():
        for field, source in sorted(rt.sources.items()):
            value = getattr(rt, field, None)
            if value is None:
                continue
            rows.append(
                {
                    "name": f"{rid}: {field}",
                    "value": _shown(value),
                    "label": classify(source),
                    "source": source,
                }
            )
    return rows


def _shown(value: object) -> str:
    """A runtime field's value as the table prints it: a number, or ``key value`` pairs.

    >>> _shown(2048), _shown(0.9), _shown({"apple": 32})
    ('2,048', '0.9', 'apple 32')
    """
    if isinstance(value, dict):
        return ", ".join(f"{k} {_shown(v)}" for k, v in sorted(value.items()))
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def methodology_context(cat: Catalog) -> dict[str, Any]:
    """Calibration constants, quant bits, runtime profiles, settings and the band table."""
    heuristic = cat.calibration["kv_heuristic_mib_per_billion"].value
    return {
        "root": "../",
        "calibration": [
            {
                "name": name,
                "value": f"{c.value:g}",
                "unit": c.unit,
                "meaning": c.meaning,
                "label": classify(c.source),
                "source": c.source,
            }
            for name, c in cat.calibration.items()
        ],
        "quants": [
            {
                "id": qid,
                "name": q.name,
                "bits": f"{q.bits_per_weight:g}",
                "source": q.sources.get("bits_per_weight", ""),
            }
            for qid, q in cat.quants.items()
        ],
        "runtimes": _runtime_rows(cat),
        "base_pct": bands.BASE_PCT,
        "max_pct": bands.MAX_PCT,
        "widenings": [
            {"key": k, "pct": pct, "reason": bands.widening_reason(k, heuristic)}
            for k, (pct, _) in bands.WIDENINGS.items()
        ],
        "small_b": bands.SMALL_PARAMS / 1e9,
        "large_b": bands.LARGE_PARAMS / 1e9,
        "tight": bands.TIGHT_SLOTS,
        "snug": bands.SNUG_SLOTS,
        "settings": settings_rows(cat),
    }


def _pct(cat: Catalog, key: str) -> str:
    """A calibration percentage as the page prints it, or "not measured"."""
    cal = cat.calibration.get(key)
    return "not measured" if cal is None else f"{cal.value:.0f} %"
