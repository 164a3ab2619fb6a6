"""Fit the serving step model's host-side and compute constants on published vLLM runs.

The datasheets and llama-bench rows give bandwidth and per-layer costs; what
they cannot give is what a busy vLLM server adds: the compute efficiency of a
mixed step, the host's fixed cost per step and per sequence in it, and the
front end's cost per request. This script searches those four on the *fit*
half of the dense vLLM V1 cases (curves chosen by hash, see
``generator.accuracy.serving``), each curve weighing the same, minimising the
median |log(predicted / measured)| of TTFT, TPOT and output tokens/s.

Then, per kind of config (vLLM dense, vLLM MoE), the band that covers 90 % of
the *fit* half's points: a band is a claim about data it was not fitted to,
and ``benchmarks/serving_report.py`` checks it on the held-out half.

Run: ``python benchmarks/fit_serving.py`` (prints the values to put in
``catalog/calibration.yaml``).
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace

from backpressure.catalog.loader import Catalog, load_catalog
from backpressure.engine.serving.model import StepCost
from backpressure.generator import resolve
from backpressure.generator.accuracy.report import quantile
from backpressure.generator.accuracy.serving import (
    METRICS,
    Case,
    Replay,
    load_cases,
    prepare,
    run_replay,
)

STEPS = {"mfu": 0.1, "bw": 0.1, "step": 1e-3, "seq": 20e-6, "request": 4e-3, "latency": 20e-3}
START = {"mfu": 0.6, "bw": 1.0, "step": 1e-3, "seq": 20e-6, "request": 5e-3, "latency": 20e-3}
BOUNDS = {
    "mfu": (0.1, 0.95),
    "bw": (0.4, 1.1),
    "step": (0.0, 20e-3),
    "seq": (0.0, 1e-3),
    "request": (0.0, 0.1),
    "latency": (0.0, 0.2),
}
CLIP = 1.0  # |log error| counted at most this much: a few wild rows must not steer the fit


def weighted_median(pairs: list[tuple[float, float]]) -> float:
    """The value at half the total weight."""
    pairs.sort()
    half = sum(w for _, w in pairs) / 2
    acc = 0.0
    for v, w in pairs:
        acc += w
        if acc >= half:
            return v
    return pairs[-1][0]


def cost_with(base: StepCost, mfu0: float, bw0: float, theta: dict[str, float]) -> StepCost:
    """A case's step cost with the fitted constants replaced."""
    return replace(
        base,
        flops_per_s=base.flops_per_s / mfu0 * theta["mfu"],
        bandwidth_bytes_per_s=base.bandwidth_bytes_per_s / bw0 * theta["bw"],
        step_overhead_s=theta["step"],
        seq_overhead_s=theta["seq"],
        request_overhead_s=theta["request"],
        request_latency_s=theta["latency"],
    )


def errors(
    cat: Catalog, prepared: list[tuple[Case, Replay]], theta: dict[str, float]
) -> list[tuple[Case, str, float]]:
    """(case, metric, log error) for every measured metric."""
    k = resolve.constants(cat)
    mfu0 = k.serving_compute_efficiency["vllm"]
    bw0 = k.serving_bandwidth_factor["vllm"]
    out = []
    for c, p in prepared:
        pred = run_replay(p, cost_with(p.server.cost, mfu0, bw0, theta))
        for m in METRICS:
            if m in c.measured and m in pred and math.isfinite(pred[m]) and pred[m] > 0:
                out.append((c, m, math.log(pred[m] / c.measured[m])))
    return out


def fit(cat: Catalog, prepared: list[tuple[Case, Replay]]) -> tuple[dict[str, float], float]:
    """Coordinate search with shrinking steps; returns the constants and the loss."""
    weight: dict[str, int] = {}
    for c, _ in prepared:
        weight[c.curve] = weight.get(c.curve, 0) + len(c.measured)

    def loss(theta: dict[str, float]) -> float:
        errs = errors(cat, prepared, theta)
        total = sum(1.0 / weight[c.curve] for c, _, _ in errs)
        return sum(min(abs(e), CLIP) / weight[c.curve] for c, _, e in errs) / total

    theta = dict(START)
    best = loss(theta)
    steps = dict(STEPS)
    for _ in range(5):
        improved = True
        while improved:
            improved = False
            for key in theta:
                for sign in (1, -1):
                    lo, hi = BOUNDS[key]
                    trial = {**theta, key: min(hi, max(lo, theta[key] + sign * steps[key]))}
                    value = loss(trial)
                    if value < best - 1e-9:
                        best, theta, improved = value, trial, True
        steps = {k: v / 2 for k, v in steps.items()}
    return theta, best


def main() -> int:
    cat = load_catalog()
    cases, _ = load_cases(cat)
    chosen = [c for c in cases if c.v1 and not c.holdout and not cat.archs[c.model].is_moe]
    prepared = [(c, p) for c in chosen if (p := prepare(cat, c)) is not None]
    print(
        f"fitting on {len(prepared)} dense vLLM V1 cases in "
        f"{len({c.curve for c, _ in prepared})} curves "
        f"({sum(len(c.measured) for c, _ in prepared)} metrics)"
    )
    theta, best = fit(cat, prepared)
    errs = [abs(e) for _, _, e in errors(cat, prepared, theta)]
    med = sorted(errs)[len(errs) // 2]
    print(f"mean clipped |log error| {best:.3f}; median |error| {math.expm1(med) * 100:.0f} %")
    for k, v in theta.items():
        print(f"  {k:8s} {v:.6g}")
    # The band on rates: 90 % of the fit half's throughput errors (dense and MoE
    # apart); the report checks it on the other half.
    fit_half = [c for c in cases if c.v1 and not c.holdout]
    for kind, moe in (("dense", False), ("moe", True)):
        group = [
            (c, p)
            for c in fit_half
            if cat.archs[c.model].is_moe == moe
            if (p := prepare(cat, c)) is not None
        ]
        errs = [abs(math.expm1(e)) for _, m, e in errors(cat, group, theta) if m == "output_tps"]
        if errs:
            print(
                f"serving_band_pct_vllm_{kind}: p90 |output tokens/s error| "
                f"{100 * quantile(errs, 0.9):.1f} % over {len(errs)} fit-half points"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
