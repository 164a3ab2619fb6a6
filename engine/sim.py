"""Deterministic tick simulation of offered load through a graph of parts (SPEC §4).

Each tick (:data:`engine.sim_model.TICK_S`, 100 ms) every node, upstream first,
admits what it is offered, holds or sheds what it cannot take by its discipline,
serves what its capacity allows and passes the served work to the nodes below it.
Every node sees every request its parent serves (an app that calls Postgres
calls it once per request). The whole run is computed for many load levels at
once: one *lane* per level, numpy arrays across lanes, so a sweep is one call
and lane ``i`` equals a single run at level ``i`` exactly.

The RNG is passed in and is the only randomness; the same seed gives the same
bits on every platform (see :mod:`engine.sim_math`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engine.queueing import Discipline
from engine.rng import Mulberry32
from engine.sim_model import SOURCE, TICK_S, SimSpec
from engine.sim_nodes import (
    NodeRun,
    advance,
    begin,
    columns,
    is_stateless,
    new_run,
    quiet,
    shed_all,
)
from engine.sim_records import RunReport, SweepReport, TickRow
from engine.sim_rules import Latency, latency, rule_ticks
from engine.sim_verdict import reports
from engine.traffic import arrivals, offered_rates

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SimResult:
    """Everything one call computed: per node ``(lanes, ticks)`` columns and verdicts."""

    spec: SimSpec
    levels: Array
    rates: Array
    flows: dict[str, dict[str, Array]]
    latency: Latency
    reports: tuple[RunReport, ...]


def simulate(spec: SimSpec, levels: Sequence[float] | Array, rng: Mulberry32) -> SimResult:
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
    lv = np.asarray(levels, dtype=np.float64).reshape(-1)
    rates = offered_rates(spec.source, lv, spec.ticks, TICK_S, rng)
    arrived = arrivals(spec.source, rates, TICK_S, rng)
    flows = run_flows(spec, arrived)
    lat = latency(spec, flows, rates)
    return SimResult(spec, lv, rates, flows, lat, reports(spec, lv, flows, lat,
                                                          rule_ticks(spec, flows, lat)))


def run_flows(spec: SimSpec, arrived: Array) -> dict[str, dict[str, Array]]:
    """The tick loop: per node columns (see :data:`engine.sim_nodes.COLUMNS`).

    Nodes joined by a ``block`` edge push back within a tick, so each such group
    steps tick by tick together; every other node is computed on its own, in
    topological order, from its parent's finished output.
    """
    lanes, ticks = arrived.shape
    runs = {n.name: new_run(n, lanes, ticks, n.parent == SOURCE) for n in spec.nodes}
    served: dict[str, Array] = {SOURCE: np.ascontiguousarray(arrived.T)}
    for group in block_groups(spec):
        members = [runs[name] for name in group]
        offered = served[members[0].spec.parent]
        if len(members) == 1 and is_stateless(members[0]):
            shed_all(members[0], offered)
        elif len(members) == 1 and members[0].spec.llm is None:
            _run_server(members[0], offered)
        else:
            _run_group(spec, members, offered)
        for r in members:
            served[r.spec.name] = r.out["served"]
    return {name: columns(r) for name, r in runs.items()}


def block_groups(spec: SimSpec) -> list[list[str]]:
    """Nodes connected through ``block`` edges, each group top node first."""
    group_of = {n.name: n.name for n in spec.nodes}
    for n in spec.nodes:  # topological order: a parent's group is settled first
        if n.discipline is Discipline.BLOCK and n.parent != SOURCE:
            group_of[n.name] = group_of[n.parent]
    groups: dict[str, list[str]] = {}
    for n in spec.nodes:
        groups.setdefault(group_of[n.name], []).append(n.name)
    return list(groups.values())


def _run_server(run: NodeRun, offered: Array) -> None:
    """A lone server: skip quiet stretches in one go, step through the rest."""
    ticks = offered.shape[0]
    overflow = np.flatnonzero((offered > run.cap[None, :]).any(axis=1))
    queue = run.queue
    t = 0
    while t < ticks:
        if queue is None or not queue.busy:
            k = int(np.searchsorted(overflow, t))
            nxt = int(overflow[k]) if k < overflow.size else ticks
            if nxt > t:
                quiet(run, t, nxt, offered[t:nxt])
                t = nxt
                continue
        begin(run, t)
        advance(run, t, offered[t], None)
        t += 1


def _run_group(spec: SimSpec, members: list[NodeRun], offered: Array) -> None:
    """Nodes that push back on each other, stepped tick by tick together."""
    by_name = {r.spec.name: r for r in members}
    plan = []
    for r in members:
        blocking = [by_name[c.name] for c in spec.children(r.spec.name)
                    if c.name in by_name and c.discipline is Discipline.BLOCK]
        parent = by_name.get(r.spec.parent)
        plan.append((r, parent, blocking))
    for t in range(offered.shape[0]):
        for r in members:
            begin(r, t)
        sent: dict[str, Array] = {}
        for r, parent, blocking in plan:
            fed = sent[parent.spec.name] if parent is not None else offered[t]
            out = advance(r, t, fed, _limit(blocking))
            sent[r.spec.name] = out
            for child in blocking:  # what each blocking child turned away
                child.pressure = np.clip(out + r.blocked - child.room, 0.0, r.blocked)


def _limit(blocking: list[NodeRun]) -> Array | None:
    """The smallest room among blocking children, or None without any."""
    if not blocking:
        return None
    room = blocking[0].room
    for child in blocking[1:]:
        room = np.minimum(room, child.room)
    return room


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
    return SweepReport(broken.rps, broken.bottleneck, broken.failing_node, broken.failing_rule,
                       points)


def tick_rows(result: SimResult, lane: int = 0) -> list[TickRow]:
    """Every node's record for every tick of one lane, tick-major, nodes in order."""
    cols = {
        n.name: (result.flows[n.name], result.latency, n.name) for n in result.spec.nodes
    }
    rows = []
    ticks = result.rates.shape[1]
    for t in range(ticks):
        for name, (f, lat, _) in cols.items():
            rows.append(TickRow(
                node=name, tick=t,
                offered=float(f["offered"][lane, t]), admitted=float(f["admitted"][lane, t]),
                served=float(f["served"][lane, t]), backlog=float(f["backlog"][lane, t]),
                dropped_shed=float(f["dropped_shed"][lane, t]),
                dropped_aged=float(f["dropped_aged"][lane, t]),
                refused_block=float(f["refused_block"][lane, t]),
                utilization=float(f["utilization"][lane, t]),
                p50_ms=float(lat.p50_ms[name][lane, t]), p99_ms=float(lat.p99_ms[name][lane, t]),
                ttft_ms=float(lat.ttft_ms[name][lane, t]),
                tokens_per_s=float(f["tokens_per_s"][lane, t]),
                error_budget_left=float(lat.budget_left[name][lane, t]),
            ))
    return rows
