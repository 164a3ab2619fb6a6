"""What the accuracy page shows: the engine against published measurements, misses included."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from backpressure.catalog.loader import Catalog
from backpressure.generator.accuracy.activation import activation_checks, fit_per_logit
from backpressure.generator.accuracy.batched import load_batched
from backpressure.generator.accuracy.decode import checks
from backpressure.generator.accuracy.kv import (
    FAMILIES,
    family_of,
    llama_cpp_checks,
    vllm_checks,
)
from backpressure.generator.accuracy.report import (
    LABELS,
    Point,
    batched_points,
    kind_of,
    points,
    summarise,
)
from backpressure.generator.accuracy.serving import METRICS, TTFT_LEFT_OUT, Case, load_cases

WORST = 25  # misses listed by name on the page
PAGE_BAND_CAP = 90.0  # the pages never publish a serving band wider than this [%]


def serving_bands(cat: Catalog) -> dict[str, float]:
    """The published serving band of each group of cases, from the calibration [%]."""
    out: dict[str, float] = {}
    for key, cal in cat.calibration.items():
        if key.startswith("serving_band_pct_"):
            scheduler, _, kind = key.removeprefix("serving_band_pct_").rpartition("_")
            out[f"{scheduler}:{kind}"] = min(cal.value, PAGE_BAND_CAP)
    return out


def _band_for(cat: Catalog, bands: dict[str, float]) -> dict[str, float]:
    """Band per report group; vLLM's for every continuously batching runtime."""
    out = {}
    for runtime in ("vLLM V1", "vLLM V0", "SGLang", "TensorRT-LLM", "TGI"):
        for device in ("consumer", "datacenter"):
            for kind in ("dense", "MoE"):
                key = f"vllm:{'moe' if kind == 'MoE' else 'dense'}"
                if key in bands:
                    out[f"{runtime} · {device} · {kind}"] = bands[key]
    for device in ("consumer", "datacenter", "unified"):
        for kind in ("dense", "MoE"):
            key = f"llama.cpp:{'moe' if kind == 'MoE' else 'dense'}"
            if key in bands:
                out[f"llama.cpp · {device} · {kind}"] = bands[key]
    return out


def all_points(cat: Catalog) -> tuple[list[Point], int, Counter[str]]:
    """Serving runs and batched-bench rows against the engine, with the published bands.

    Returns the points, the number of cases and why the other rows were left out.
    """
    bands = _band_for(cat, serving_bands(cat))
    cases, skipped = load_cases(cat)
    rows, batched_skipped = load_batched(cat)
    pts = points(cat, bands, cases) + batched_points(cat, bands, rows)
    why = Counter(skipped)
    for reason, n in batched_skipped.items():
        why[f"llama-batched-bench: {reason}"] += n
    return pts, len(cases) + len(rows), why


def _summary_rows(pts: Sequence[Point], split: str) -> list[dict[str, Any]]:
    rows = []
    for group, metric in sorted({(p.group, p.metric) for p in pts}):
        sel = [p for p in pts if p.group == group and p.metric == metric]
        s = summarise(sel)
        if s is None:
            continue
        rows.append(
            {
                "split": split,
                "group": group,
                "metric": LABELS[metric],
                "n": s.n,
                "curves": s.curves,
                "median": f"{s.median_abs_pct:.0f} %",
                "p90": f"{s.p90_abs_pct:.0f} %",
                "bias": f"{s.bias_pct:+.0f} %",
                "inside": f"{100 * s.inside_share:.0f} %",
                "band": f"±{sel[0].band_pct:g} %",
            }
        )
    return rows


def serving_context(cat: Catalog) -> dict[str, Any]:
    """Serving under load: per group and split, and the worst held-out misses."""
    pts, n_cases, skipped = all_points(cat)
    fit = [p for p in pts if not p.case.holdout]
    held = [p for p in pts if p.case.holdout]
    primary = [p for p in held if kind_of(p) is not None]
    headline = {}
    for metric in METRICS:
        s = summarise([p for p in primary if p.metric == metric])
        if s is not None:
            headline[LABELS[metric]] = {
                "median": f"{s.median_abs_pct:.0f} %",
                "p90": f"{s.p90_abs_pct:.0f} %",
                "inside": f"{100 * s.inside_share:.0f} %",
                "n": s.n,
            }
    worst = sorted(held, key=lambda p: -abs(math.log(p.predicted / p.measured)))[:WORST]
    return {
        "peers": peers_context(pts),
        "cases": n_cases,
        "points": len(pts),
        "curves": len({p.case.curve for p in pts}),
        "skipped": sorted(
            ((why, n) for why, n in Counter(skipped).items() if why != TTFT_LEFT_OUT),
            key=lambda kv: -kv[1],
        ),
        "ttft_left_out": skipped[TTFT_LEFT_OUT],
        "headline": headline,
        "rows": _summary_rows(held, "held out") + _summary_rows(fit, "fitted"),
        "worst": [
            {
                "metric": LABELS[p.metric],
                "measured": _fmt(p.measured, p.metric),
                "predicted": _fmt(p.predicted, p.metric),
                "error": f"{100 * p.error:+.0f} %",
                "inside": "yes" if p.inside else "no",
                "what": (
                    f"{p.case.gpus}× {p.case.gpu} · {p.case.model} · {p.case.quant} · "
                    f"{p.case.framework} {p.case.version} · {_load(p)}"
                ),
                "source": p.case.source,
            }
            for p in worst
        ],
    }


def peers_context(pts: Sequence[Point]) -> dict[str, Any]:
    """Runs of vLLM V1 that the same page repeated with other servers: their measured TTFTs.

    Same source document, GPU, parallel degree, model, weights, request lengths,
    request count and load; only the server differs. It shows how much of a TTFT
    miss is the server's own, beyond what the GPU's work explains.
    """
    by_run: dict[tuple[Any, ...], dict[str, Point]] = {}
    for p in pts:
        c = p.case
        if p.metric != "ttft_ms" or not isinstance(c, Case):
            continue
        if c.framework == "vllm" and not c.v1:
            continue
        key = (c.source.split("#")[0], c.gpu, c.gpus, c.model, c.quant, c.prompt, c.output,
               c.requests, c.users, c.rate, c.max_num_batched_tokens)  # fmt: skip
        by_run.setdefault(key, {})[c.framework] = p
    ranked: list[tuple[float, dict[str, str]]] = []
    for runs in by_run.values():
        v = runs.get("vllm")
        others = {f: p for f, p in runs.items() if f != "vllm"}
        if v is None or not others:
            continue
        ratio = v.measured / min(p.measured for p in others.values())
        ranked.append(
            (
                ratio,
                {
                    "what": f"{_setup(v)} · {_load(v)}",
                    "vllm": _duration(v.measured),
                    "sglang": _measured_duration(others.get("sglang")),
                    "trtllm": _measured_duration(others.get("tensorrt-llm")),
                    "engine": _duration(v.predicted),
                    "ratio": f"{ratio:.1f}×",
                    "source": v.case.source,
                },
            )
        )
    ranked.sort(key=lambda rr: -rr[0])
    return {
        "rows": [row for _, row in ranked],
        "median_ratio": f"{statistics.median(r for r, _ in ranked):.1f}×" if ranked else "-",
    }


def _setup(p: Point) -> str:
    return f"{p.case.gpus}× {p.case.gpu} · {p.case.model} · {p.case.quant}"


def _measured_duration(p: Point | None) -> str:
    return "-" if p is None else _duration(p.measured)


def _duration(ms: float) -> str:
    return f"{ms:,.0f} ms" if ms < 1000 else f"{ms / 1000:,.1f} s"


def _load(p: Point) -> str:
    c = p.case
    shape = f"{c.prompt:,} in / {c.output:,} out"
    if c.rate is not None:
        return f"{c.rate:g} req/s, {shape}"
    return f"{c.users:,} in flight, {shape}"


def _fmt(value: float, metric: str) -> str:
    return f"{value:,.0f} tok/s" if metric == "output_tps" else f"{value:,.1f} ms"


def decode_context(cat: Catalog) -> dict[str, Any]:
    """Single-stream decode: held-out summaries per kind, and the held-out rows outside the band."""
    rows = checks(cat)
    kinds = []
    for kind in ("dense", "MoE"):
        held = [c for c in rows if c.kind == kind and not c.fit]
        if not held:
            continue
        errors = sorted(abs(c.error) for c in held)
        kinds.append(
            {
                "kind": kind,
                "fit": sum(c.kind == kind and c.fit for c in rows),
                "n": len(held),
                "median": f"{100 * statistics.median(errors):.1f} %",
                "inside": f"{sum(c.inside for c in held)} of {len(held)} "
                f"({100 * sum(c.inside for c in held) / len(held):.0f} %)",
            }
        )
    misses = sorted((c for c in rows if not c.fit and not c.inside), key=lambda c: -abs(c.error))
    return {
        "kinds": kinds,
        "misses": [
            {
                "kind": c.kind,
                "device": f"{c.hardware} ({c.backend})",
                "model": f"{c.model} {c.quant} {c.test}",
                "measured": f"{c.measured:,.1f}",
                "predicted": f"{c.predicted:,.1f}",
                "error": f"{100 * c.error:+.0f} %",
                "band": f"±{c.band_pct} %",
                "source": c.source,
            }
            for c in misses
        ],
    }


KV_LISTED = 12  # held-out vLLM rows listed by name, largest end-to-end error first


def _median_pct(errors: Sequence[float]) -> str:
    return f"{100 * statistics.median(abs(e) for e in errors):.1f} %" if errors else "-"


def kv_context(cat: Catalog) -> dict[str, Any]:
    """KV capacity: per attention family, the allocator and end-to-end checks on held-out logs."""
    rows = vllm_checks(cat)
    held = [r for r in rows if r.held_out]
    families = []
    in_catalog = {family_of(cat, m) for m in cat.archs}
    for fam in FAMILIES:
        sel = [r for r in held if r.family == fam]
        e2e = [r.error for r in sel if r.error is not None]
        if not sel:
            if fam in in_catalog:  # a kind of model the site publishes, with nothing to check it
                none = {"n": 0, "alloc": "-", "median": "no log found", "worst": "-", "inside": "-"}
                families.append({"family": fam, **none})
            continue
        families.append(
            {
                "family": fam,
                "n": len(sel),
                "alloc": _median_pct([r.alloc / r.logged - 1 for r in sel if r.alloc is not None]),
                "median": _median_pct(e2e) if e2e else "no end-to-end log",
                "worst": f"{100 * max(map(abs, e2e)):.1f} %" if e2e else "-",
                "inside": f"{sum(bool(r.inside) for r in sel)} of {len(e2e)}" if e2e else "-",
            }
        )
    alloc = [abs(r.alloc / r.logged - 1) for r in held if r.alloc is not None]
    fitted = [r.error for r in rows if not r.held_out and r.error is not None]
    worst = sorted((r for r in held if r.error is not None), key=lambda r: -abs(r.error or 0))
    lcpp = llama_cpp_checks(cat)
    return {
        "activation": _activation(cat),
        "rows": len(rows),
        "held": len(held),
        # logs of checkpoints the site does not publish (calibration_archs.yaml)
        "extra": sorted({r.model for r in rows if r.model not in cat.archs}),
        "families": families,
        "fitted": {"n": len(fitted), "median": _median_pct(fitted)},
        "alloc_worst": f"{100 * max(alloc):.1f} %" if alloc else "-",
        "worst": [
            {
                "what": (
                    f"{r.count}× {r.gpu} · {r.model} · {_release(r.version)} · "
                    f"{r.context:,} context"
                ),
                "logged": f"{r.logged:,}",
                "predicted": f"{r.e2e:,}",
                "error": f"{100 * (r.error or 0):+.1f} %",
                "band": f"±{r.band} %",
                "kv": _gib_pair(r.budget_gib, r.logged_kv_gib),
                "weights": _gib_pair(r.weights_gib, r.logged_weights_gib),
                "source": r.url,
            }
            for r in worst[:KV_LISTED]
        ],
        "llama_cpp": {
            "n": len(lcpp),
            "median": _median_pct([r.error for r in lcpp]),
            "worst": f"{100 * max(abs(r.error) for r in lcpp):.1f} %" if lcpp else "-",
        },
    }


def _activation(cat: Catalog) -> dict[str, Any] | None:
    """The activation-peak check in numbers, or None where the catalog leaves no rows."""
    act = activation_checks(cat)
    held = [p.error for p in act if p.held_out]
    if not held or len(held) == len(act):
        return None
    worst = max(act, key=lambda p: abs(p.error))
    return {
        "n": len(act),
        "held": len(held),
        "per_logit": f"{fit_per_logit(cat, half=False):.2f}",
        "median": _median_pct(held),
        "worst": f"{100 * max(map(abs, held)):.1f} %",
        "all_worst": f"{worst.model} at {worst.tp} GPUs, {100 * worst.error:+.1f} %",
    }


def _gib_pair(predicted: float | None, logged: float | None) -> str:
    if predicted is None or logged is None:
        return "-"
    return f"{predicted:.2f} vs {logged:.2f}"


def _release(version: str) -> str:
    return f"vLLM {version.split('+')[0]}" if version else "vLLM (release not printed)"
