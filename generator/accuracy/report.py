"""How far the engine's serving numbers hold against published runs, fitted and held out.

Every comparable case is replayed; each metric it measured (TTFT, TPOT, output
tokens/s) becomes one point with its error and whether it falls inside the band
the site publishes for that kind of config. Points are summarised per split
(fit: the half of the curves the calibration was fitted on; holdout: the other
half) and per group (runtime and scheduler, device class, dense or MoE).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from backpressure.catalog.loader import Catalog
from backpressure.generator.accuracy import batched
from backpressure.generator.accuracy.archs import arch_of
from backpressure.generator.accuracy.batched import BatchedCase
from backpressure.generator.accuracy.serving import CONSUMER, METRICS, Case, load_cases, replay

LABELS = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "output_tps": "output tokens/s"}


@dataclass(frozen=True, slots=True)
class Point:
    """One measured metric of one case against the engine."""

    case: Case | BatchedCase
    group: str
    metric: str
    measured: float
    predicted: float
    band_pct: float

    @property
    def error(self) -> float:
        """Relative error, predicted over measured minus one [-]."""
        return self.predicted / self.measured - 1.0

    @property
    def inside(self) -> bool:
        """Whether the measurement lies inside the predicted value's band."""
        lo = self.predicted * (1 - self.band_pct / 100)
        hi = self.predicted * (1 + self.band_pct / 100)
        return lo <= self.measured <= hi


def group_of(cat: Catalog, case: Case) -> str:
    """``runtime · device class · dense/MoE``, e.g. ``vLLM V1 · datacenter · MoE``."""
    if case.framework == "vllm":
        runtime = "vLLM V1" if case.v1 else "vLLM V0"
    else:
        runtime = {"sglang": "SGLang", "tensorrt-llm": "TensorRT-LLM", "tgi": "TGI"}.get(
            case.framework, case.framework
        )
    device = "consumer" if case.gpu in CONSUMER else "datacenter"
    kind = "MoE" if arch_of(cat, case.model).is_moe else "dense"
    return f"{runtime} · {device} · {kind}"


def points(
    cat: Catalog, band: dict[str, float], cases: Iterable[Case] | None = None
) -> list[Point]:
    """Every comparable metric, replayed; ``band`` maps a group to its published band [%]."""
    out = []
    for case in cases if cases is not None else load_cases(cat)[0]:
        pred = replay(cat, case)
        if not pred:
            continue
        group = group_of(cat, case)
        width = band.get(group, band.get("*", 50.0))
        for metric in METRICS:
            if metric in case.measured and math.isfinite(pred.get(metric, math.nan)):
                out.append(Point(case, group, metric, case.measured[metric], pred[metric], width))
    return out


@dataclass(frozen=True, slots=True)
class Summary:
    """Errors of a set of points: count, median and p90 of |error|, share inside the band."""

    n: int
    curves: int
    median_abs_pct: float
    p90_abs_pct: float
    bias_pct: float
    inside_share: float


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile by the nearest-rank rule (no interpolation)."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def summarise(pts: Sequence[Point]) -> Summary | None:
    """Summary of ``pts``; None for none."""
    if not pts:
        return None
    errs = [p.error for p in pts]
    return Summary(
        len(pts),
        len({p.case.curve for p in pts}),
        100 * quantile([abs(e) for e in errs], 0.5),
        100 * quantile([abs(e) for e in errs], 0.9),
        100 * quantile(errs, 0.5),
        sum(p.inside for p in pts) / len(pts),
    )


def batched_group(cat: Catalog, case: BatchedCase) -> str:
    """``llama.cpp · device class · dense/MoE`` of a batched-bench case."""
    gpu = cat.gpus[case.gpu]
    device = (
        "consumer"
        if case.gpu in CONSUMER
        else "unified"
        if gpu.memory_kind == "unified"
        else "datacenter"
    )
    kind = "MoE" if arch_of(cat, case.model).is_moe else "dense"
    return f"llama.cpp · {device} · {kind}"


def batched_points(
    cat: Catalog, band: dict[str, float], cases: Iterable[BatchedCase] | None = None
) -> list[Point]:
    """Every comparable metric of the ``llama-batched-bench`` rows, priced by the step model."""
    out = []
    for case in cases if cases is not None else batched.load_batched(cat)[0]:
        got = batched.cost_for(cat, case)
        if got is None:
            continue
        pred = batched.predict(case, *got)
        group = batched_group(cat, case)
        width = band.get(group, band.get("*", 50.0))
        for metric in METRICS:
            if metric in case.measured and math.isfinite(pred.get(metric, math.nan)):
                out.append(Point(case, group, metric, case.measured[metric], pred[metric], width))
    return out


def kind_of(p: Point) -> str | None:
    """The band a point checks: ``<scheduler>:<dense|moe>``, or None outside the fitted runtimes.

    Only the runs of the schedulers the engine follows (vLLM V1, llama.cpp)
    set and judge the bands; the others are reported for comparison.
    """
    if isinstance(p.case, BatchedCase):
        scheduler = "llama.cpp"
    elif p.case.v1:
        scheduler = "vllm"
    else:
        return None
    return f"{scheduler}:{'moe' if p.group.endswith('MoE') else 'dense'}"
