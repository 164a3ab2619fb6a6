"""Breaking points of a config: its LLM rig pushed through the load simulation.

The rig is the simplest honest one: seeded Poisson load into an LLM server whose
queue buffers (up to a depth, abandoning requests older than an age) in front of
``effective_concurrency`` slots. Every load level of the grid is one lane of the
simulation, and a batch of configs shares one tick loop (their rigs have the same
shape), each with its own seed; the breaking points are the lowest levels at which
each failure rule fires. A config gives the same numbers alone or in any batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from backpressure.catalog.loader import Catalog
from backpressure.engine.results import CapacityResult
from backpressure.engine.rng import mulberry32
from backpressure.engine.sim.breaking import NODE, BreakPoints, reduce, sig, steady
from backpressure.engine.sim.model import (
    TICK_S,
    LlmSpec,
    NodeKind,
    NodeSpec,
    Rules,
    SimSpec,
    slot_time_s,
)
from backpressure.engine.sim.queueing import Discipline
from backpressure.engine.sim.run import MAX_LANES, Scratch, SimResult, simulate_many
from backpressure.engine.sim.traffic import SourceSpec
from backpressure.generator.keys import seed_for
from backpressure.generator.records import Curves

Array = npt.NDArray[np.float64]

TIMELINE_STEP_S = 1.0  # the timeline chart shows one point per simulated second,
TIMELINE_POINTS = 360  # or fewer, evenly spaced, for runs longer than six minutes


@dataclass(frozen=True, slots=True)
class LoadSettings:
    """Request profile, failure rules and the load grid (catalog/settings.yaml)."""

    prompt_tokens: int
    output_tokens: int
    ttft_budget_ms: float
    p99_slo_ms: float
    soak_utilization: float
    soak_s: float
    points: int
    min_fraction: float
    max_fraction: float
    sim_seconds: float
    min_service_times: float
    seed: int
    queue_depth_per_slot: float
    queue_max_age_s: float

    @classmethod
    def from_catalog(cls, cat: Catalog) -> LoadSettings:
        """Settings with the derived p99 SLO filled in."""
        s = cat.settings
        min_rate = cat.calibration["min_stream_tokens_per_s"].value
        p99 = s.p99_slo_ms or s.ttft_budget_ms + 1000.0 * s.output_tokens / min_rate
        return cls(
            s.prompt_tokens,
            s.output_tokens,
            s.ttft_budget_ms,
            p99,
            s.soak_utilization,
            s.soak_seconds,
            s.load_points,
            s.load_min_fraction,
            s.load_max_fraction,
            s.sim_seconds,
            s.sim_min_service_times,
            s.seed,
            s.queue_depth_per_slot,
            s.queue_max_age_s,
        )


def llm_spec(cap: CapacityResult, s: LoadSettings) -> LlmSpec:
    """The capacity engine's numbers as the simulation's LLM node."""
    return LlmSpec(
        slots=cap.effective_concurrency,
        prefill_tokens_per_s=cap.prefill_tokens_per_s or 0.0,
        step_fixed_s=cap.step_fixed_s or 0.0,
        step_per_kv_token_s=cap.step_per_kv_token_s or 0.0,
        step_compute_per_seq_s=cap.step_compute_per_seq_s or 0.0,
        prompt_tokens=s.prompt_tokens,
        output_tokens=s.output_tokens,
    )


def mean_service_s(cap: CapacityResult, s: LoadSettings) -> float:
    """Seconds a request holds a slot when every slot is busy."""
    busy = np.array([float(cap.effective_concurrency)])
    return float(slot_time_s(llm_spec(cap, s), busy)[0])


def run_seconds(service: float, s: LoadSettings) -> float:
    """Simulated duration: ``sim_seconds``, or whole multiples of it to span enough services."""
    return s.sim_seconds * max(1, math.ceil(s.min_service_times * service / s.sim_seconds - 1e-9))


def rig(cap: CapacityResult, s: LoadSettings, name: str, duration_s: float) -> SimSpec:
    """Load -> LLM server with a buffering queue, under the catalog's failure rules.

    The run lasts ``duration_s`` (:func:`run_seconds` of the config's service time).
    """
    llm = llm_spec(cap, s)
    node = NodeSpec(
        name=NODE,
        parent="load",
        kind=NodeKind.LLM,
        discipline=Discipline.BUFFER,
        servers=llm.slots,
        max_depth=s.queue_depth_per_slot * llm.slots,
        max_age_s=s.queue_max_age_s,
        resource="slots",
        llm=llm,
    )
    rules = Rules(
        p99_slo_ms=s.p99_slo_ms,
        ttft_budget_ms=s.ttft_budget_ms,
        soak_utilization=s.soak_utilization,
        soak_s=s.soak_s,
    )
    return SimSpec(
        name=name,
        source=SourceSpec(),
        nodes=(node,),
        rules=rules,
        duration_s=duration_s,
    )


def grid(saturation: float, s: LoadSettings) -> Array:
    """Offered-load levels, log-spaced around the analytic saturation rate."""
    fractions = np.geomspace(s.min_fraction, s.max_fraction, s.points)
    return np.array([sig(saturation * f) for f in fractions])


def _curves(
    cid: str, levels: Array, res: SimResult, breaking_lane: int | None, offered: Array, lost: Array
) -> Curves:
    """Chart series of one config; ``offered`` and ``lost`` are its per-lane totals."""
    f = res.flows[NODE]
    lat = res.latency
    ticks = f["backlog"].shape[1]
    step = max(1, round(TIMELINE_STEP_S / TICK_S), math.ceil(ticks / TIMELINE_POINTS))
    lane = breaking_lane if breaking_lane is not None else len(levels) - 1

    def r(a: Array) -> tuple[float, ...]:
        # _sig(v, 5) of every value, formatted in one call: the same digits
        values = a.tolist()
        return tuple(map(float, (("%.5g " * len(values)) % tuple(values)).split()))

    return Curves(
        config_id=cid,
        load_rps=r(levels),
        p50_ms=r(steady(lat.p50_ms[NODE])),
        p99_ms=r(steady(lat.path_p99_ms[NODE])),
        ttft_ms=r(steady(lat.ttft_ms[NODE])),
        slot_occupancy=r(steady(f["utilization"])),
        goodput_rps=r(steady(f["served"]) / TICK_S),
        shed_share=r(np.where(offered > 0, lost / np.maximum(offered, 1e-12), 0.0)),
        timeline_rps=float(levels[lane]),
        timeline_s=r(np.arange(0, f["backlog"].shape[1], step) * TICK_S),
        timeline_queue_depth=r(f["backlog"][lane, ::step]),
        timeline_ttft_ms=r(lat.ttft_ms[NODE][lane, ::step]),
        timeline_error_budget=r(lat.total_budget_left[lane, ::step]),
    )


def empty_curves(cid: str) -> Curves:
    """Curves of a config that does not fit: nothing to draw."""
    return Curves(cid, (), (), (), (), (), (), (), None, (), (), (), ())


def load_sweep(cap: CapacityResult, s: LoadSettings, cid: str) -> tuple[BreakPoints, Curves]:
    """Breaking points and chart series of one config."""
    return load_sweep_many([cap], s, [cid])[0]


def _simulable(cap: CapacityResult) -> bool:
    return bool(cap.fits and cap.prefill_tokens_per_s and cap.step_fixed_s is not None)


def load_sweep_many(
    caps: Sequence[CapacityResult],
    s: LoadSettings,
    ids: Sequence[str],
    scratch: Scratch | None = None,
) -> list[tuple[BreakPoints, Curves]]:
    """Breaking points and chart series of many configs, simulated in shared tick loops.

    Entry ``i`` equals ``load_sweep(caps[i], s, ids[i])``: every config keeps its
    own seed (:func:`seed_for`) and its lanes never mix with another's. ``scratch``
    is memory the simulation may reuse across calls (see :class:`engine.sim.run.Scratch`).
    """
    out = [(BreakPoints(), empty_curves(cid)) for cid in ids]
    todo = [i for i, cap in enumerate(caps) if _simulable(cap)]
    services = {i: mean_service_s(caps[i], s) for i in todo}
    by_length: dict[float, list[int]] = {}  # configs of one run length share tick loops
    for i in todo:
        by_length.setdefault(run_seconds(services[i], s), []).append(i)
    for seconds, group in sorted(by_length.items()):
        runs = [
            (
                rig(caps[i], s, ids[i], seconds),
                grid(caps[i].effective_concurrency / services[i], s),
                mulberry32(seed_for(ids[i], s.seed)),
            )
            for i in group
        ]
        # Longer runs, fewer lanes per loop: the records stay the size of a default run's.
        lanes = max(1, round(MAX_LANES * s.sim_seconds / seconds))
        for i, res in zip(group, simulate_many(runs, lanes, scratch), strict=True):
            out[i] = _reduce(caps[i], s, ids[i], services[i], res)
    return out


def _reduce(
    cap: CapacityResult, s: LoadSettings, cid: str, service: float, res: SimResult
) -> tuple[BreakPoints, Curves]:
    """One config's simulation reduced to its breaking points and curves."""
    red = reduce(
        res, service, cap.effective_concurrency, s.p99_slo_ms, s.ttft_budget_ms, s.soak_utilization
    )
    return red.points, _curves(cid, res.levels, res, red.breaking_lane, red.offered, red.lost)


def break_fields(points: BreakPoints, band_pct: int) -> dict[str, Any]:
    """Row fields, each breaking point with its band applied (low, high)."""
    out: dict[str, Any] = {
        "mean_service_s": points.mean_service_s,
        "soak_ok_at_85": points.soak_ok_at_85,
        "bottleneck": points.bottleneck,
    }
    for name in (
        "saturation_rps",
        "shed_onset_rps",
        "p99_break_rps",
        "ttft_break_rps",
        "soak_break_rps",
    ):
        value = getattr(points, name)
        out[name] = value
        out[f"{name}_low"] = sig(value * (1 - band_pct / 100)) if value is not None else None
        out[f"{name}_high"] = sig(value * (1 + band_pct / 100)) if value is not None else None
    return out
