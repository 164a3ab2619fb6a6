"""Deterministic tick simulation of offered load through a graph of parts (SPEC §4).

Each tick (:data:`engine.sim.model.TICK_S`, 100 ms) every node, upstream first,
admits what it is offered, holds or sheds what it cannot take by its discipline,
serves what its capacity allows and passes the served work to the nodes below it.
Every node sees every request its parent serves (an app that calls Postgres
calls it once per request). The whole run is computed for many load levels at
once: one *lane* per level, numpy arrays across lanes, so a sweep is one call
and lane ``i`` equals a single run at level ``i`` exactly. :func:`simulate_many`
goes one step further for a batch sweep: the lanes of several configs whose
graphs have the same shape share one tick loop, each config with its own numbers
and its own random stream, and each result equals its own :func:`simulate` call.

The RNG is passed in and is the only randomness; the same seed gives the same
bits on every platform (see :mod:`engine.sim.libm`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np
import numpy.typing as npt
from backpressure.engine.rng import Mulberry32
from backpressure.engine.sim.loop import block_groups, run_lanes
from backpressure.engine.sim.model import TICK_S, SimSpec
from backpressure.engine.sim.nodes import NodeLanes, NodeRun, Scratch, columns
from backpressure.engine.sim.records import RunReport, SweepReport, TickRow
from backpressure.engine.sim.rules import NEVER, Latency, latency, rule_ticks
from backpressure.engine.sim.traffic import arrivals, offered_rates
from backpressure.engine.sim.verdict import Fails, report, reports

Array = npt.NDArray[np.float64]
Levels = Sequence[float] | Array

__all__ = [
    "Scratch",
    "SimResult",
    "block_groups",
    "shape_of",
    "simulate",
    "simulate_many",
    "sweep",
    "tick_rows",
]


@dataclass(frozen=True)
class SimResult:
    """Everything one call computed: per node ``(lanes, ticks)`` columns and verdicts.

    ``fails`` holds the first failing tick of every (rule, node) per lane; the
    per-lane :class:`RunReport` objects are built on first use (``reports``) or one
    lane at a time (:meth:`report`), since a batch sweep reads only one of them.
    """

    spec: SimSpec
    levels: Array
    rates: Array
    flows: dict[str, dict[str, Array]]
    latency: Latency
    fails: Fails

    @cached_property
    def reports(self) -> tuple[RunReport, ...]:
        """One verdict per lane."""
        return reports(self.spec, self.levels, self.flows, self.latency, self.fails)

    @property
    def passed(self) -> npt.NDArray[np.bool_]:
        """Per lane: no rule fired."""
        ok = np.ones(self.levels.shape, dtype=bool)
        for ticks in self.fails.values():
            ok &= ticks == NEVER
        return ok

    def report(self, lane: int) -> RunReport:
        """The verdict of one lane (equal to ``reports[lane]``)."""
        if "reports" in self.__dict__:
            return self.reports[lane]
        return report(
            self.spec, lane, float(self.levels[lane]), self.flows, self.latency, self.fails
        )


def simulate(spec: SimSpec, levels: Levels, rng: Mulberry32) -> SimResult:
    """Run ``spec`` at every load level in ``levels`` (one lane each).

    Parameters
    ----------
    spec : SimSpec
        The graph, source, rules and duration.
    levels : sequence of float
        Load levels [requests/s]; each scales the source's rate profile.
    rng : Mulberry32
        Seeded stream; every lane uses the same draws (common random numbers).

    Returns
    -------
    SimResult
        Columns per node and lane, latency and one :class:`RunReport` per lane.
    """
    return next(simulate_many([(spec, levels, rng)]))


# Lanes (configs x levels) that share one tick loop. The numpy loop pays a fixed
# Python overhead per tick (~120 us) plus ~40 ns per lane, so it wants many lanes;
# the compiled loop of engine.sim.kernel (the sweep's rig) has no per-tick
# overhead to spread. A 180 s run's per-tick records and queue take about 76 bytes
# per lane and tick: 1,024 lanes keep them near 140 MB per process. Measured on
# the full sweep: 2,048 and 4,096 lanes were no faster and peaked 180 and 370 MB
# higher per worker (benchmarks/bench_sweep.py).
MAX_LANES = 1024


def simulate_many(
    runs: Sequence[tuple[SimSpec, Levels, Mulberry32]],
    max_lanes: int = MAX_LANES,
    scratch: Scratch | None = None,
) -> Iterator[SimResult]:
    """Run several configs of one shape through shared tick loops; yield each result.

    Parameters
    ----------
    runs : sequence of (SimSpec, levels, Mulberry32)
        One entry per config: its scenario, its load levels [requests/s] and its
        own seeded stream. The specs must have the same shape (:func:`shape_of`):
        node names, parents, kinds, disciplines, max ages, LIFO settings and
        duration. Capacities, depths, LLM numbers, sources and rules may differ.
    max_lanes : int
        Lanes per tick loop [-]; consecutive configs are grouped up to this many
        (a config with more lanes runs alone).
    scratch : Scratch, optional
        Memory for the per-tick records, reused across groups and, if the caller
        keeps it, across calls. It never changes a result.

    Yields
    ------
    SimResult
        Per config, in order: exactly what ``simulate(spec, levels, rng)`` returns.

    Notes
    -----
    The lanes of a group of configs (configs x levels) step through the tick
    loop together, which spreads its per-tick cost over many lanes; every step
    is elementwise across lanes, so no lane sees another. Each config draws its
    arrivals from its own stream, in the same order as alone. Results are
    derived for a few hundred lanes at a time (:data:`POST_LANE_TICKS`) and yielded
    one config at a time; a result holds views of its block's arrays, so only
    the blocks whose results the caller still holds stay alive.
    """
    runs = list(runs)
    if not runs:
        return
    first = shape_of(runs[0][0])
    for spec, _, _ in runs[1:]:
        if shape_of(spec) != first:
            raise ValueError(
                f"simulate_many: {spec.name!r} differs in shape from {runs[0][0].name!r}"
            )
    scratch = Scratch() if scratch is None else scratch
    group: list[tuple[SimSpec, Array, Mulberry32]] = []
    lanes = 0
    for spec, lv, rng in runs:
        levels = np.asarray(lv, dtype=np.float64).reshape(-1)
        if group and lanes + levels.size > max_lanes:
            yield from _simulate_group(group, scratch)
            group, lanes = [], 0
        group.append((spec, levels, rng))
        lanes += levels.size
    yield from _simulate_group(group, scratch)


# Lane-ticks whose results are derived together, after the tick loop, as one
# block of time-major arrays (see engine.sim.rules.cumsum_ticks): 256 lanes of a
# 180 s run, enough to sum along ticks a row of lanes at a time, few enough to
# keep the block near 100 MB. Longer runs take fewer lanes per block.
POST_LANE_TICKS = 256 * 1800


def _simulate_group(
    runs: list[tuple[SimSpec, Array, Mulberry32]], scratch: Scratch
) -> Iterator[SimResult]:
    """One tick loop over every lane of ``runs``, then each config's result in turn."""
    ticks = runs[0][0].ticks
    lanes = [levels.size for _, levels, _ in runs]
    arrived = scratch.array("arrived", (ticks, sum(lanes)))
    rates = []
    start = 0
    for (spec, levels, rng), n in zip(runs, lanes, strict=True):
        rates.append(offered_rates(spec.source, levels, ticks, TICK_S, rng))
        arrived[:, start : start + n] = arrivals(spec.source, rates[-1], TICK_S, rng).T
        start += n
    node_runs = run_lanes([spec for spec, _, _ in runs], lanes, arrived, scratch)
    post_lanes = max(1, POST_LANE_TICKS // ticks)
    first = 0
    while first < len(runs):
        last, total = first + 1, lanes[first]  # configs that share rules, up to post_lanes
        while (
            last < len(runs)
            and total + lanes[last] <= post_lanes
            and runs[last][0].rules == runs[first][0].rules
        ):
            total += lanes[last]
            last += 1
        offset = sum(lanes[:first])
        yield from _results(
            runs[first:last],
            rates[first:last],
            lanes[first:last],
            node_runs,
            slice(offset, offset + total),
        )
        first = last


def _results(
    runs: list[tuple[SimSpec, Array, Mulberry32]],
    rates: list[Array],
    lanes: list[int],
    node_runs: dict[str, NodeRun],
    part: slice,
) -> Iterator[SimResult]:
    """Derive latency and verdicts for a block of configs at once, then split it per config.

    The block's lanes are ``part`` of the tick loop; the configs share rules. Each
    config's result holds ``(lanes, ticks)`` views of the block's arrays.
    """
    spec = runs[0][0]
    nodes = {
        n.name: NodeLanes.of([s.nodes[i] for s, _, _ in runs], lanes)
        for i, n in enumerate(spec.nodes)
    }
    flows = {name: columns(node_runs[name], part, p) for name, p in nodes.items()}
    block_rates = np.empty((rates[0].shape[1], sum(lanes))).T  # time-major, as the flows
    start = 0
    for r, n in zip(rates, lanes, strict=True):
        block_rates[start : start + n] = r
        start += n
    lat = latency(spec, flows, block_rates, nodes)
    fails = rule_ticks(spec, flows, lat)
    start = 0
    for (config, levels, _), n in zip(runs, lanes, strict=True):
        one = slice(start, start + n)
        start += n
        yield SimResult(
            config,
            levels,
            block_rates[one],
            {name: {col: a[one] for col, a in f.items()} for name, f in flows.items()},
            Latency(*(_lanes_of(getattr(lat, f.name), one) for f in fields(Latency))),
            {key: ticks[one] for key, ticks in fails.items()},
        )


def _lanes_of(value: dict[str, Array] | Array, one: slice) -> dict[str, Array] | Array:
    """Lanes ``one`` of a :class:`Latency` field (a per-node dict or an array)."""
    if isinstance(value, dict):
        return {name: a[one] for name, a in value.items()}
    return value[one]


def shape_of(spec: SimSpec) -> tuple[object, ...]:
    """What configs sharing one tick loop must agree on: the graph and its timing."""
    return (
        spec.ticks,
        tuple(
            (
                n.name,
                n.parent,
                n.kind,
                n.discipline,
                n.max_depth > 0,
                n.max_age_s,
                n.lifo,
                n.lifo_after_s,
                n.llm is None,
            )
            for n in spec.nodes
        ),
    )


def sweep(spec: SimSpec, levels: Sequence[float], rng: Mulberry32) -> SweepReport:
    """Run every level in one call and find the lowest one that fails a rule.

    Parameters
    ----------
    spec : SimSpec
        The scenario.
    levels : sequence of float
        Load levels in increasing order [requests/s].
    rng : Mulberry32
        Seeded stream.

    Returns
    -------
    SweepReport
        ``breaking_rps`` and what failed there, plus every level's report.
    """
    result = simulate(spec, levels, rng)
    points = result.reports
    broken = next((p for p in points if not p.passed), None)
    if broken is None:
        return SweepReport(None, points[-1].bottleneck, None, None, points)
    return SweepReport(
        broken.rps, broken.bottleneck, broken.failing_node, broken.failing_rule, points
    )


def tick_rows(result: SimResult, lane: int = 0) -> list[TickRow]:
    """Every node's record for every tick of one lane, tick-major, nodes in order."""
    cols = {n.name: (result.flows[n.name], result.latency, n.name) for n in result.spec.nodes}
    rows = []
    ticks = result.rates.shape[1]
    for t in range(ticks):
        for name, (f, lat, _) in cols.items():
            rows.append(
                TickRow(
                    node=name,
                    tick=t,
                    offered=float(f["offered"][lane, t]),
                    admitted=float(f["admitted"][lane, t]),
                    served=float(f["served"][lane, t]),
                    backlog=float(f["backlog"][lane, t]),
                    dropped_shed=float(f["dropped_shed"][lane, t]),
                    dropped_aged=float(f["dropped_aged"][lane, t]),
                    refused_block=float(f["refused_block"][lane, t]),
                    utilization=float(f["utilization"][lane, t]),
                    p50_ms=float(lat.p50_ms[name][lane, t]),
                    p99_ms=float(lat.p99_ms[name][lane, t]),
                    ttft_ms=float(lat.ttft_ms[name][lane, t]),
                    tokens_per_s=float(f["tokens_per_s"][lane, t]),
                    error_budget_left=float(lat.budget_left[name][lane, t]),
                )
            )
    return rows
