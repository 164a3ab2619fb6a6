"""Breaking points of a config from its load simulation: pure numbers from a result.

One LLM node under a load grid (one lane per level): the lowest level at which
each failure rule fires, where the queue starts shedding, and the completion
rate with every slot busy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from backpressure.engine.sim.model import TICK_S
from backpressure.engine.sim.rules import NEVER
from backpressure.engine.sim.run import SimResult
from backpressure.engine.sim.sums import lane_sums

Array = npt.NDArray[np.float64]

NODE = "llm"
SHED_ONSET_SHARE = 0.001  # a queue "starts shedding" once 0.1 % of offered work is lost


@dataclass(frozen=True, slots=True)
class BreakPoints:
    """Where one config breaks, in offered requests per second."""

    mean_service_s: float | None = None
    saturation_rps: float | None = None
    shed_onset_rps: float | None = None
    p99_break_rps: float | None = None
    ttft_break_rps: float | None = None
    soak_break_rps: float | None = None
    soak_ok_at_85: bool | None = None
    bottleneck: str = "does not fit: no slot for a single request"


def sig(x: float, digits: int = 6) -> float:
    """Round to significant digits so published rates are short and stable."""
    return float(f"{x:.{digits}g}")


def first_level(levels: Array, fired: npt.NDArray[np.bool_]) -> float | None:
    """The lowest level at which ``fired`` holds, or None."""
    idx = np.flatnonzero(fired)
    return float(levels[idx[0]]) if idx.size else None


def steady(x: Array) -> Array:
    """Per-lane mean over the second half of the run (after the warm-up)."""
    half = x.shape[1] // 2
    return lane_sums(x, half) / (x.shape[1] - half)  # x[:, half:].mean(axis=1)


def saturation(f: dict[str, Array]) -> float | None:
    """Completions per second with every slot busy, read at the top load level.

    The steady completion rate over the steady slot occupancy: requests per
    second per busy slot, times the slots. Where the top level keeps every slot
    busy this is its completion rate; where it does not (a server so slow that
    arrivals are sparse and waiting requests abandon before a slot frees), it
    is still the rate the slots deliver while busy, not the arrival gaps.
    None when no slot was ever busy in the steady half.
    """
    busy = float(steady(f["utilization"][-1:])[0])
    served = float(steady(f["served"][-1:])[0]) / TICK_S
    return sig(served / busy) if busy > 0.0 else None


@dataclass(frozen=True, slots=True)
class Reduction:
    """A config's breaking points, the lane that broke first, and per-lane totals [requests]."""

    points: BreakPoints
    breaking_lane: int | None
    offered: Array
    lost: Array


def reduce(
    res: SimResult,
    service_s: float,
    slots: int,
    p99_slo_ms: float,
    ttft_budget_ms: float,
    soak_utilization: float,
) -> Reduction:
    """One config's load simulation reduced to its breaking points.

    Parameters
    ----------
    res : SimResult
        The run of the config's rig over its load grid (node :data:`NODE`).
    service_s : float
        Mean time a request holds a slot with every slot busy [s].
    slots : int
        Concurrent sequences the server runs [-].
    p99_slo_ms, ttft_budget_ms : float
        The latency rules [ms].
    soak_utilization : float
        The soak rule's utilization [-]; the level nearest that share of the
        analytic saturation rate is judged for the soak verdict.
    """
    levels = res.levels
    analytic = slots / service_s  # Little's law: L = lambda W
    f, lat = res.flows[NODE], res.latency
    offered, lost = lane_sums(f["offered"]), lane_sums(f["lost"])
    shed = lost / np.maximum(offered, 1e-12) > SHED_ONSET_SHARE
    soak_fired = res.fails["soak", NODE] != NEVER
    soak_lane = int(np.argmin(np.abs(levels - soak_utilization * analytic)))
    failing = np.flatnonzero(~res.passed)
    breaking_lane = int(failing[0]) if failing.size else None
    points = BreakPoints(
        mean_service_s=sig(service_s),
        saturation_rps=saturation(f),
        shed_onset_rps=first_level(levels, shed),
        p99_break_rps=first_level(levels, (lat.path_rolled[NODE] > p99_slo_ms).any(axis=1)),
        ttft_break_rps=first_level(levels, (lat.ttft_rolled[NODE] > ttft_budget_ms).any(axis=1)),
        soak_break_rps=first_level(levels, soak_fired),
        soak_ok_at_85=not bool(soak_fired[soak_lane]),
        bottleneck=res.report(
            breaking_lane if breaking_lane is not None else len(levels) - 1
        ).bottleneck,
    )
    return Reduction(points, breaking_lane, offered, lost)
