"""After the tick loop: latency along the M/M/1 curve, error budget, failure rules.

Nothing here feeds back into the flows, so it runs once over whole
``(lanes, ticks)`` arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engine.queueing import mm1_factor
from engine.sim_math import LN2, LN100
from engine.sim_model import SOURCE, TICK_S, NodeKind, NodeSpec, SimSpec, prefill_s

Array = npt.NDArray[np.float64]

RULES = ("ttft", "p99", "error_budget", "soak")  # tie-break order at one tick
NEVER = np.iinfo(np.int64).max
ANY_NODE = "*"  # the error budget is shared; who spent it is decided per lane


@dataclass(frozen=True, slots=True)
class Latency:
    """Per node ``(lanes, ticks)`` arrays derived from the flows [ms or -]."""

    rho: dict[str, Array]
    p50_ms: dict[str, Array]
    p99_ms: dict[str, Array]
    path_p99_ms: dict[str, Array]
    ttft_ms: dict[str, Array]
    budget_left: dict[str, Array]
    total_budget_left: Array


def rolling_mean(x: Array, window: int) -> Array:
    """Trailing mean over ``window`` ticks along axis 1 (fewer at the start)."""
    c = np.cumsum(x, axis=1)
    out = np.empty_like(c)
    w = min(window, x.shape[1])
    out[:, :w] = c[:, :w] / np.arange(1, w + 1, dtype=np.float64)
    out[:, w:] = (c[:, w:] - c[:, :-w]) / float(window) if window < x.shape[1] else out[:, w:]
    return out


def latency(spec: SimSpec, flows: dict[str, dict[str, Array]], rates: Array) -> Latency:
    """Latency quantiles, TTFT and error budget for every node.

    Notes
    -----
    A server's own time in system at quantile q is its explicit queue wait plus
    ``S * F(rho) * -ln(1 - q)``: the M/M/1 sojourn time, exponential with mean
    ``S / (1 - rho)`` (:func:`engine.queueing.mm1_factor`), with ``rho`` averaged
    over the rules' window. That term stands for queueing inside a tick, which
    the loop cannot see. An LLM's waiting is explicit (slots are tracked), so its
    time is queue wait plus the slot time at the current batch. Quantiles along a
    path are added, which overstates a path's p99 slightly (it is conservative).
    """
    window = max(1, round(spec.rules.window_s / TICK_S))
    rho, p50, p99, path, ttft = {}, {}, {}, {}, {}
    for node in spec.nodes:
        f = flows[node.name]
        rho[node.name] = rolling_mean(f["utilization"], window)
        p50[node.name], p99[node.name] = _own_quantiles(node, f, rho[node.name])
        up = path.get(node.parent, 0.0)
        path[node.name] = p99[node.name] + up
        ttft[node.name] = (
            up + (f["wait_p99_ticks"] * TICK_S + prefill_s(node.llm)) * 1000.0
            if node.llm is not None else np.zeros_like(rates)
        )
    budget = (1.0 - spec.rules.availability) * np.cumsum(rates * TICK_S, axis=1)[:, -1:]
    left = {n.name: _left(np.cumsum(flows[n.name]["lost"], axis=1), budget) for n in spec.nodes}
    total = sum((flows[n.name]["lost"] for n in spec.nodes), np.zeros_like(rates))
    return Latency(rho, p50, p99, path, ttft, left, _left(np.cumsum(total, axis=1), budget))


def _own_quantiles(node: NodeSpec, f: dict[str, Array], rho: Array) -> tuple[Array, Array]:
    w50, w99 = f["wait_p50_ticks"] * TICK_S, f["wait_p99_ticks"] * TICK_S
    if node.kind is NodeKind.LLM:
        return (w50 + f["slot_time_s"]) * 1000.0, (w99 + f["slot_time_s"]) * 1000.0
    sojourn = node.service_s * mm1_factor(rho)
    return (w50 + sojourn * LN2) * 1000.0, (w99 + sojourn * LN100) * 1000.0


def _left(cum_lost: Array, budget: Array) -> Array:
    safe = np.where(budget > 0.0, budget, 1.0)
    return np.where(budget > 0.0, 1.0 - cum_lost / safe, np.where(cum_lost > 0.0, 0.0, 1.0))


def _first(mask: Array) -> npt.NDArray[np.int64]:
    """Index of the first True along axis 1 per lane, or NEVER."""
    hit = mask.any(axis=1)
    return np.where(hit, np.argmax(mask, axis=1), NEVER).astype(np.int64)


def rule_ticks(spec: SimSpec, flows: dict[str, dict[str, Array]],
               lat: Latency) -> dict[tuple[str, str], npt.NDArray[np.int64]]:
    """First tick each (rule, node) fails, per lane (``NEVER`` when it holds)."""
    r = spec.rules
    window = max(1, round(r.window_s / TICK_S))
    out: dict[tuple[str, str], npt.NDArray[np.int64]] = {}
    leaves = [n for n in spec.nodes if not spec.children(n.name)]
    for n in leaves:
        if n.kind is NodeKind.LLM:
            out["ttft", n.name] = _first(judged(lat.ttft_ms[n.name], window) > r.ttft_budget_ms)
        elif r.p99_slo_ms is not None:
            out["p99", n.name] = _first(judged(lat.path_p99_ms[n.name], window) > r.p99_slo_ms)
    spent = (lat.total_budget_left <= 0.0) & (np.cumsum(_total_lost(spec, flows), axis=1) > 0)
    out["error_budget", ANY_NODE] = _first(spent)  # the node is found per lane
    soak_w = round(r.soak_s / TICK_S)
    for n in spec.nodes:
        mean = np.round(rolling_mean(flows[n.name]["utilization"], soak_w), 6)
        mean[:, : soak_w - 1] = 0.0  # a soak needs the whole window
        out["soak", n.name] = _first(mean >= r.soak_utilization)
    return out


def judged(x: Array, window: int, warmup: int | None = None) -> Array:
    """Rolling mean over ``window``, zero until ``warmup`` ticks have passed.

    The warm-up defaults to one window: the M/M/1 curve is a steady-state result,
    and one tick is no evidence of a standing queue. Runs shorter than the warm-up
    are judged whole.
    """
    mean = rolling_mean(x, window)
    skip = window if warmup is None else warmup
    if skip < mean.shape[1]:
        mean[:, : skip - 1] = 0.0
    return mean


def _total_lost(spec: SimSpec, flows: dict[str, dict[str, Array]]) -> Array:
    first = flows[spec.nodes[0].name]["lost"]
    return sum((flows[n.name]["lost"] for n in spec.nodes[1:]), first.copy())


def ancestors(spec: SimSpec, name: str) -> list[str]:
    """``name`` and every node above it, top first."""
    by_name = {n.name: n for n in spec.nodes}
    chain = []
    while name != SOURCE:
        chain.append(name)
        name = by_name[name].parent
    return chain[::-1]


def descendants(spec: SimSpec, name: str) -> list[str]:
    """``name`` and every node below it, in topological order."""
    keep = {name}
    for n in spec.nodes:
        if n.parent in keep:
            keep.add(n.name)
    return [n.name for n in spec.nodes if n.name in keep]
