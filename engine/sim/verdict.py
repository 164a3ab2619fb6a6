"""Per-run verdicts: which rule fired first, which node to blame, the one-line bottleneck."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from backpressure.engine.sim.model import TICK_S, NodeKind, NodeSpec, SimSpec
from backpressure.engine.sim.records import NodeSummary, RunReport
from backpressure.engine.sim.rules import (
    ANY_NODE,
    NEVER,
    RULES,
    Latency,
    ancestors,
    descendants,
    judged,
    warmed,
)

Array = npt.NDArray[np.float64]
Fails = dict[tuple[str, str], npt.NDArray[np.int64]]


def reports(
    spec: SimSpec, levels: Array, flows: dict[str, dict[str, Array]], lat: Latency, fails: Fails
) -> tuple[RunReport, ...]:
    """One :class:`RunReport` per lane."""
    return tuple(
        report(spec, lane, float(levels[lane]), flows, lat, fails) for lane in range(len(levels))
    )


def report(
    spec: SimSpec,
    lane: int,
    rps: float,
    flows: dict[str, dict[str, Array]],
    lat: Latency,
    fails: Fails,
) -> RunReport:
    """The :class:`RunReport` of one lane, run at ``rps``.

    The rolling means it judges are the lane's rows of those in ``lat``; each row
    is summed on its own, so a lane gets the same bits alone or among others.
    """
    window = max(1, round(spec.rules.window_s / TICK_S))
    one = slice(lane, lane + 1)
    rolled = {
        "p99": {n.name: warmed(lat.p99_rolled[n.name][one], window)[0] for n in spec.nodes},
        "path": {n.name: warmed(lat.path_rolled[n.name][one], window)[0] for n in spec.nodes},
        "ttft": {n.name: warmed(lat.ttft_rolled[n.name][one], window)[0] for n in spec.nodes},
        "rho": {n.name: judged(lat.rho[n.name][one], 1, window)[0] for n in spec.nodes},
    }
    return _report(spec, lane, rps, flows, lat, fails, rolled)


def _report(
    spec: SimSpec,
    lane: int,
    rps: float,
    flows: dict[str, dict[str, Array]],
    lat: Latency,
    fails: Fails,
    rolled: dict[str, dict[str, Array]],
) -> RunReport:
    nodes = tuple(_summary(n, lane, flows[n.name], lat, rolled) for n in spec.nodes)
    servers = [
        n.name for n in spec.nodes if n.kind is NodeKind.SERVER and not spec.children(n.name)
    ]
    llms = [n.name for n in spec.nodes if n.kind is NodeKind.LLM]
    worst_p99 = max((float(rolled["path"][n].max()) for n in servers), default=0.0)
    worst_ttft = max((float(rolled["ttft"][n].max()) for n in llms), default=0.0)
    left = float(lat.total_budget_left[lane, -1])
    event = _earliest(spec, lane, fails)
    if event is None:
        top = max(nodes, key=lambda s: s.mean_utilization)
        line = _pass_line(spec, _spec(spec, top.node), rps, top, worst_p99, worst_ttft)
        return RunReport(rps, True, None, None, None, line, worst_p99, worst_ttft, left, nodes)
    tick, rule, node = event
    blamed = _blame(spec, lane, tick, rule, node, flows, lat)
    summary = next(s for s in nodes if s.node == blamed)
    detail = {"ttft": worst_ttft, "p99": worst_p99}.get(rule, 0.0)
    line = _fail_line(spec, _spec(spec, blamed), rps, rule, summary, detail, tick, flows, lane)
    return RunReport(
        rps, False, rule, blamed, round(tick * TICK_S, 6), line, worst_p99, worst_ttft, left, nodes
    )


def _spec(spec: SimSpec, name: str) -> NodeSpec:
    return next(n for n in spec.nodes if n.name == name)


def _summary(
    node: NodeSpec,
    lane: int,
    f: dict[str, Array],
    lat: Latency,
    rolled: dict[str, dict[str, Array]],
) -> NodeSummary:
    def total(col: str) -> float:
        return float(np.cumsum(f[col][lane])[-1])

    return NodeSummary(
        node=node.name,
        mean_utilization=total("utilization") / f["utilization"].shape[1],
        peak_utilization=float(rolled["rho"][node.name].max()),
        max_backlog=float(f["backlog"][lane].max()),
        worst_p99_ms=float(rolled["p99"][node.name].max()),
        worst_ttft_ms=float(rolled["ttft"][node.name].max()),
        offered=total("offered"),
        served=total("served"),
        dropped_shed=total("dropped_shed"),
        dropped_aged=total("dropped_aged"),
        refused_block=total("refused_block"),
        error_budget_left=float(lat.budget_left[node.name][lane, -1]),
    )


def _earliest(spec: SimSpec, lane: int, fails: Fails) -> tuple[int, str, str] | None:
    """The first failure: ordered by (tick, rule order, node order)."""
    order = {n.name: i for i, n in enumerate(spec.nodes)}
    order[ANY_NODE] = -1
    hits = [
        (int(ticks[lane]), RULES.index(rule), order[node], rule, node)
        for (rule, node), ticks in fails.items()
        if ticks[lane] != NEVER
    ]
    if not hits:
        return None
    tick, _, _, rule, node = min(hits)
    return tick, rule, node


def _blame(
    spec: SimSpec,
    lane: int,
    tick: int,
    rule: str,
    node: str,
    flows: dict[str, dict[str, Array]],
    lat: Latency,
) -> str:
    """The node to name: the busiest one among those that could have caused it.

    Latency: the failing path. Error budget: the node that lost most work and
    everything below it (a blocking node makes the one above it drop). Soak: itself.
    """
    if rule == "error_budget":
        node = max(
            spec.nodes, key=lambda n: float(np.cumsum(flows[n.name]["lost"][lane])[tick])
        ).name
        candidates = descendants(spec, node)
    elif rule == "soak":
        return node
    else:
        candidates = ancestors(spec, node)
    busiest = max(float(lat.rho[c][lane, tick]) for c in candidates)
    return next(c for c in candidates if float(lat.rho[c][lane, tick]) == busiest)


def fmt_rps(rps: float) -> str:
    """1500 -> '1,500'; 7.5 -> '7.5'."""
    return f"{rps:,.0f}" if rps >= 100 or rps == int(rps) else f"{rps:,.3g}"


def fmt_ms(ms: float) -> str:
    """640 -> '640 ms'; 2300 -> '2.3 s'."""
    return f"{ms:,.0f} ms" if ms < 1000 else f"{ms / 1000:,.1f} s"


def _state(node: NodeSpec, util: float) -> str:
    if node.llm is not None:
        slots = node.llm.slots
        if util >= 0.99:
            return f"slots full ({slots} of {slots})"
        return f"slots {util * 100:.0f} % full ({slots} slots)"
    if util >= 0.99:
        return f"{node.resource} saturated"
    return f"{node.resource} {util * 100:.0f} % busy"


def _fail_line(
    spec: SimSpec,
    node: NodeSpec,
    rps: float,
    rule: str,
    s: NodeSummary,
    detail: float,
    tick: int,
    flows: dict[str, dict[str, Array]],
    lane: int,
) -> str:
    head = f"{node.name}: {_state(node, s.peak_utilization)} at {fmt_rps(rps)} rps"
    r = spec.rules
    if rule == "ttft":
        return f"{head}; TTFT {fmt_ms(detail)} over the {fmt_ms(r.ttft_budget_ms)} budget"
    if rule == "p99":
        return f"{head}; p99 {fmt_ms(detail)} over the {fmt_ms(r.p99_slo_ms or 0.0)} SLO"
    if rule == "soak":
        window = round(r.soak_s / TICK_S)
        util = flows[node.name]["utilization"][lane, tick - window + 1 : tick + 1]
        mean = float(np.cumsum(util)[-1])
        busy = "full" if node.llm is not None else "busy"
        return (
            f"{node.name}: {node.resource} {100 * mean / window:.0f} % {busy} for "
            f"{r.soak_s / 60:g} min at {fmt_rps(rps)} rps; soak limit "
            f"{r.soak_utilization * 100:.0f} %"
        )
    offered = float(np.cumsum(flows[spec.nodes[0].name]["offered"][lane])[-1])
    lost = sum(float(np.cumsum(flows[n.name]["lost"][lane])[-1]) for n in spec.nodes)
    share = 100 * lost / offered if offered > 0 else 0.0
    return (
        f"{head}; {share:.1f} % of requests lost, error budget "
        f"({100 * (1 - r.availability):g} %) spent at {tick * TICK_S:.1f} s"
    )


def _pass_line(
    spec: SimSpec, node: NodeSpec, rps: float, s: NodeSummary, worst_p99: float, worst_ttft: float
) -> str:
    head = f"{node.name}: {_state(node, s.peak_utilization)} at {fmt_rps(rps)} rps; holds"
    r = spec.rules
    parts = []
    if r.p99_slo_ms is not None and worst_p99 > 0:
        parts.append(f"p99 {fmt_ms(worst_p99)} within the {fmt_ms(r.p99_slo_ms)} SLO")
    if worst_ttft > 0:
        parts.append(f"TTFT {fmt_ms(worst_ttft)} within the {fmt_ms(r.ttft_budget_ms)} budget")
    return f"{head} ({'; '.join(parts)})" if parts else f"{head} every rule"
