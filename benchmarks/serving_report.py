"""How far the serving numbers hold: TTFT, TPOT and output tokens/s against measurements.

Writes ``benchmarks/serving-report.txt``. The measurements are the published
serving runs of ``benchmarks/data/serving_load.csv`` (replayed with their own
protocol, ``generator.accuracy.serving``) and the llama.cpp
``llama-batched-bench`` rows of ``benchmarks/data/batched_bench.csv``
(``generator.accuracy.batched``). Each is split by curve into a fit half, on
which ``benchmarks/fit_serving.py`` fitted the constants, and a held-out half,
which only this report reads.

The bands: for each kind of config the engine schedules itself (vLLM V1 and
llama.cpp, dense and MoE) the band is the 90th percentile, over the *fit*
half's points (TTFT, TPOT and output tokens/s pooled), of the error a band
bounds, |measured / predicted - 1|, rounded up to a whole percent. It is then
judged on the held-out half, each metric on its own: one band stands beside a
config's TTFT, TPOT and throughput alike, so it must hold for each of them, not
only for their pool. Where fewer than 85 % of one metric's held-out points
fall inside it, the rule widens it to the next of the fit half's 92.5th, 95th
and 97.5th percentiles under which every metric reaches 85 % (the 97.5th if
none does), and the report prints the held-out shares of both: the miss is
stated, not tuned away. A widened band was chosen by looking at the held-out
half, so its share there is no longer an independent check; the report says
which bands that holds for. The pages cap a band at 90 %.

Run: ``python benchmarks/serving_report.py`` (``--check`` exits 1 when the
bands in catalog/calibration.yaml differ from the ones this rule gives).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence

from backpressure.catalog.loader import Catalog, load_catalog
from backpressure.engine.serving.step import MAX_MAT_VEC, expert_reads
from backpressure.generator.accuracy import batched
from backpressure.generator.accuracy.page import PAGE_BAND_CAP, all_points, peers_context
from backpressure.generator.accuracy.report import LABELS, Point, kind_of, quantile, summarise
from backpressure.generator.accuracy.serving import METRICS, TTFT_LEFT_OUT
from backpressure.generator.paths import ROOT

OUT = ROOT / "benchmarks" / "serving-report.txt"
COVER = 0.85  # held-out share a band must cover
FIT_Q = 0.90
WIDER_Q = (0.925, 0.95, 0.975)  # the fit quantiles a band is widened to, in turn
TARGETS = {"tpot_ms": 15.0, "ttft_ms": 25.0, "output_tps": 15.0}  # held-out median |error| [%]
KINDS = ("vllm:dense", "vllm:moe", "llama.cpp:dense", "llama.cpp:moe")


def fit_band(pts: Sequence[Point], q: float) -> float:
    """The ``q`` quantile of |measured / predicted - 1| over ``pts``, rounded up [%].

    That is the quantity a band bounds (a measurement within ``band`` % of the
    published figure), so a band set this way covers ``q`` of the points it
    was set on.
    """
    return float(math.ceil(100 * quantile([abs(p.measured / p.predicted - 1) for p in pts], q)))


def inside(pts: Sequence[Point], band: float) -> float:
    """Share of ``pts`` whose measurement lies within ``band`` % of the prediction."""
    width = min(band, PAGE_BAND_CAP) / 100
    ok = [p.predicted * (1 - width) <= p.measured <= p.predicted * (1 + width) for p in pts]
    return sum(ok) / len(ok) if ok else math.nan


def worst_inside(pts: Sequence[Point], band: float) -> tuple[float, str]:
    """The lowest share inside ``band`` of any one metric of ``pts``, and that metric."""
    shares = [(inside([p for p in pts if p.metric == m], band), m) for m in METRICS]
    return min((s, m) for s, m in shares if not math.isnan(s))


def bands(pts: Sequence[Point]) -> dict[str, tuple[float, float, float, float, str]]:
    """Per kind: (fit band, its worst metric's held-out share, widened band or NaN,
    that band's worst held-out share, the metric the p90 band misses on or "")."""
    out = {}
    for kind in KINDS:
        fit = [p for p in pts if kind_of(p) == kind and not p.case.holdout]
        held = [p for p in pts if kind_of(p) == kind and p.case.holdout]
        if not fit:
            continue
        band = fit_band(fit, FIT_Q)
        cover, short = worst_inside(held, band) if held else (math.nan, "")
        wide, wide_cover = math.nan, math.nan
        if held and cover < COVER:
            for q in WIDER_Q:
                wide = fit_band(fit, q)
                wide_cover = worst_inside(held, wide)[0]
                if wide_cover >= COVER:
                    break
        out[kind] = (band, cover, wide, wide_cover, short if cover < COVER else "")
    return out


def published(cat: Catalog, kind: str) -> float | None:
    scheduler, _, k = kind.partition(":")
    cal = cat.calibration.get(f"serving_band_pct_{scheduler}_{k}")
    return cal.value if cal is not None else None


def _table(pts: Sequence[Point]) -> list[str]:
    lines = [
        f"{'split':9s} {'group':36s} {'metric':16s} {'n':>4s} {'curves':>6s} "
        f"{'median':>7s} {'p90':>6s} {'bias':>6s} {'band':>6s} {'inside':>6s}"
    ]
    for split, held in (("held-out", True), ("fit", False)):
        sel = [p for p in pts if p.case.holdout == held]
        for group, metric in sorted({(p.group, p.metric) for p in sel}):
            g = [p for p in sel if p.group == group and p.metric == metric]
            s = summarise(g)
            if s is None:
                continue
            band = min(g[0].band_pct, PAGE_BAND_CAP)
            lines.append(
                f"{split:9s} {group:36s} {LABELS[metric]:16s} {s.n:4d} {s.curves:6d} "
                f"{s.median_abs_pct:6.0f}% {s.p90_abs_pct:5.0f}% {s.bias_pct:+5.0f}% "
                f"{band:5.0f}% {100 * s.inside_share:5.0f}%"
            )
    return lines


def report(cat: Catalog) -> tuple[str, bool]:
    """The report's text, and whether the catalog's bands are the ones the rule gives."""
    pts, n_cases, skipped = all_points(cat)
    lines = [
        "Serving under load: the engine against published measurements",
        "=" * 62,
        "",
        f"{len(pts)} points from {n_cases} comparable runs and batched-bench rows "
        f"({len({p.case.curve for p in pts})} curves); fit and held-out halves split by curve.",
        "Error: predicted / measured - 1. Bias: median signed error. Band: the published",
        f"serving band (capped at {PAGE_BAND_CAP:.0f} %). Inside: measurement within the band.",
        "",
        "Held-out targets (vLLM V1 and llama.cpp; median |error|, and 85 % inside the band):",
    ]
    ok_all = True
    for kind in KINDS:
        held = [p for p in pts if kind_of(p) == kind and p.case.holdout]
        fit = [p for p in pts if kind_of(p) == kind and not p.case.holdout]
        for metric in METRICS:
            h = summarise([p for p in held if p.metric == metric])
            f = summarise([p for p in fit if p.metric == metric])
            if h is None and f is None:
                continue
            target = TARGETS[metric]
            ht = (
                "no held-out points"
                if h is None
                else (
                    f"held-out median {h.median_abs_pct:4.0f} % p90 {h.p90_abs_pct:4.0f} % "
                    f"inside {100 * h.inside_share:3.0f} % (n={h.n}) "
                    + ("meets" if h.median_abs_pct <= target else "MISSES")
                    + f" <= {target:.0f} %"
                    + ("" if h.inside_share >= COVER else f", inside MISSES >= {100 * COVER:.0f} %")
                )
            )
            ft = (
                ""
                if f is None
                else f"; fit median {f.median_abs_pct:.0f} % p90 {f.p90_abs_pct:.0f} %"
            )
            lines.append(f"  {kind:16s} {LABELS[metric]:16s} {ht}{ft}")
    lines += [
        "",
        "Bands (fit half's p90 of |measured / predicted - 1|, judged on the held-out half,",
        "each metric on its own; inside: the share of the metric with the fewest inside):",
    ]
    for kind, (band, cover, wide, wide_cover, short) in bands(pts).items():
        pub = published(cat, kind)
        expect = band if math.isnan(wide) else wide
        same = pub is not None and pub == expect
        ok_all = ok_all and same
        line = f"  {kind:16s} fit p90 {band:4.0f} %: held-out inside {100 * cover:5.1f} %"
        if not math.isnan(wide):
            line += (
                f" < {100 * COVER:.0f} % ({LABELS[short]}): MISS; widened to {wide:.0f} %: "
                f"held-out inside {100 * wide_cover:5.1f} %"
                + (" (still a MISS)" if wide_cover < COVER else "")
                + " (chosen on the held-out half: no longer an independent check)"
            )
        line += f"; catalog has {pub if pub is not None else 'none'}" + ("" if same else " (STALE)")
        lines.append(line)
    lines += ["", "By runtime, device class and dense/MoE:", *_table(pts)]
    peers = peers_context(pts)
    lines += [
        "",
        "The same runs through other servers (same page, GPUs, model, weights, requests):",
        f"mean TTFT measured; vLLM's is a median {peers['median_ratio']} the fastest other's.",
        f"  {'run':<72} {'vLLM':>8} {'SGLang':>8} {'TRT-LLM':>8} {'engine':>8} {'ratio':>6}",
    ]
    for r in peers["rows"]:
        lines.append(
            f"  {r['what'][:72]:<72} {r['vllm']:>8} {r['sglang']:>8} {r['trtllm']:>8} "
            f"{r['engine']:>8} {r['ratio']:>6}"
        )
    lines += ["", "Rows not compared:"]
    for why, n in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])):
        if why != TTFT_LEFT_OUT:
            lines.append(f"  {n:5d}  {why}")
    if skipped[TTFT_LEFT_OUT]:
        lines += ["", "Compared runs whose TTFT is left out:"]
        lines.append(f"  {skipped[TTFT_LEFT_OUT]:5d}  {TTFT_LEFT_OUT}")
    lines += [
        "",
        "SGLang, TensorRT-LLM, TGI and vLLM V0 runs are costed with vLLM V1's scheduler and",
        "constants; they neither set nor judge a band. The llama.cpp rows are two devices:",
        "the DGX Spark has no published dense compute figure, so its prompt phase (TTFT) is",
        "not predicted; the M2 Ultra's is, from its calibrated figure. llama.cpp's compute",
        "constants are not fitted here.",
    ]
    lines += implied_expert_reads(cat)
    return "\n".join(lines) + "\n", ok_all


def implied_expert_reads(cat: Catalog) -> list[str]:
    """Experts per MoE layer each batched-bench decode step's time implies, against those priced.

    What a step's measured time leaves, after its fixed per-pass cost and the
    dense weights and KV it reads at the priced bandwidth, divided by one
    expert's bytes over all MoE layers: the experts it read per layer, if
    bandwidth alone set the rest. One line per device and model, above the
    token counts where llama.cpp runs mat-vec kernels (each weight read once a
    pass from there on).
    """
    cases, _ = batched.load_batched(cat)
    ratios: dict[tuple[str, str], dict[int, list[float]]] = {}
    for case in cases:
        got = batched.cost_for(cat, case)
        if got is None or got[0].num_experts <= 0 or case.batch <= MAX_MAT_VEC:
            continue
        cost = got[0]
        step_s = case.measured["tpot_ms"] / 1e3 - cost.pass_overhead_s
        held = case.prompt + case.output // 2  # KV tokens a sequence holds mid-run
        window = min(held, cost.window) if cost.window > 0 else held
        kv = case.batch * (held * cost.kv_read_bytes_per_token)
        kv += case.batch * window * cost.window_read_bytes_per_token
        read = (step_s * cost.bandwidth_bytes_per_s - cost.weight_bytes - kv) / cost.expert_bytes
        priced = expert_reads(cost, case.batch)[case.batch]
        by_batch = ratios.setdefault((case.gpu, case.model), {})
        by_batch.setdefault(case.batch, []).append(read / priced)
    lines = [
        "",
        "MoE decode steps of llama-batched-bench (both halves), above "
        f"{MAX_MAT_VEC} sequences: experts per layer",
        "the measured step time implies (bandwidth alone setting the rest) over those priced",
        "(median over prompt lengths; batched-bench feeds random token ids):",
    ]
    for (gpu, model), by_batch in sorted(ratios.items()):
        cells = "  ".join(
            f"B{b} {sorted(v)[(len(v) - 1) // 2]:.2f}" for b, v in sorted(by_batch.items())
        )
        lines.append(f"  {gpu:16s} {model:22s} {cells}")
    lines += [
        "Under 1, the steps read fewer distinct experts than uniform routing gives (routing",
        "concentrated on some experts); over 1, they take longer than their reads explain. The",
        "engine prices uniform routing (served prompts route differently from random ids), so",
        "these are the llama.cpp MoE errors above, left as they are.",
    ]
    return lines


def main(argv: list[str]) -> int:
    cat = load_catalog()
    text, ok = report(cat)
    OUT.write_text(text, encoding="utf-8")
    print(text, end="")
    if "--check" in argv and not ok:
        print("serving bands in catalog/calibration.yaml differ from the rule's", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
